"""Loaded by pytest before the conftest files of tests/python and tests/serving, so before
torch (and with it torch_tpu) is imported.

Every test session compiles from an empty program cache of its own: no result and no
compile count may depend on what an earlier run left in the disk cache, because a fresh
CI machine has none. Tests of the disk tier make their own directories."""
import atexit
import os
import shutil
import tempfile

_cache_dir = tempfile.mkdtemp(prefix="torch_tpu_test_cache_")
os.environ["TORCH_TPU_CACHE_DIR"] = _cache_dir
atexit.register(shutil.rmtree, _cache_dir, ignore_errors=True)
