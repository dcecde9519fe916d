"""Loaded by pytest before the conftest files of tests/python and tests/serving, so before
torch (and with it torch_tpu) is imported.

Every test session compiles from empty caches (torch_tpu's programs and PyTorch's
AOTAutograd graphs): no result and no compile count may depend on what an earlier run
left on disk, because a fresh CI machine has none. scripts/test.sh names one fresh directory for all its stages
(TORCH_TPU_TEST_CACHE_DIR), so the fused-mode pass reuses what the op-mode pass compiled,
as the stages of one CI run always do; a session started any other way gets an empty
directory of its own. Tests of the disk tier make their own directories."""

import atexit
import os
import shutil
import tempfile

if os.environ.get("TORCH_TPU_TEST_CACHE_DIR"):
    _cache_dir = os.environ["TORCH_TPU_TEST_CACHE_DIR"]
else:
    _cache_dir = tempfile.mkdtemp(prefix="torch_tpu_test_cache_")
    atexit.register(shutil.rmtree, _cache_dir, ignore_errors=True)
os.environ["TORCH_TPU_CACHE_DIR"] = _cache_dir
# PyTorch's own caches (AOTAutograd's holds backend "tpu"'s graphs) start empty too.
os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(_cache_dir, "inductor")
