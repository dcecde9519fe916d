"""OpInfo conformance of the `tpu` device against CPU PyTorch.

For every selected OpInfo of `torch.testing._internal.common_methods_invocations.op_db`
and every sample input (`op.sample_inputs('cpu', dtype)`) over the dtypes both the device
and the op support on CPU, the op runs on CPU and on tpu (the same sample moved with
`.to('tpu')`), the outputs are compared, and each sample gets one status:

  match     outputs equal within the dtype's tolerance (ops.TOLERANCES)
  mismatch  tpu ran but its output differs (value, shape, dtype, structure or device)
  error     tpu raised while CPU worked
  crash     the worker process died (or the op exceeded its timeout) on this sample
  skip      CPU itself raised: the sample is not valid, so it is not counted

The CPU fallback is on, and the fallback counters of `torch_tpu.metrics` are read before
and after each sample: a match with no fallback is a *native* match. Headline numbers,
over the samples that are not skipped:

  match rate        = match / samples
  native match rate = native match / samples

With --compile, tpu runs each sample through `torch.compile(lambda *a, **k: op(*a, **k),
backend="tpu", dynamic=False)` (a fresh Dynamo cache per sample), still against CPU eager.
A sample during which a graph ran op by op (`graph_fallbacks` of `torch_tpu.metrics`) is
not native; the backend's reasons are recorded per op, and `no_graph` counts samples that
ran no compiled program. --write-docs keeps these runs in the page's "Compiled mode"
section, apart from the eager ones.

Ops run in worker subprocesses, one op after another; when a worker dies the parent
counts a crash for the sample in progress, starts a fresh worker and resumes the op after
that sample. Sample generation is seeded per (op, dtype) so a fresh worker regenerates
the same samples.

Usage (from the repository root, with a built torch_tpu importable; Python runs the
folder's __main__.py):
  python tools/conformance                  # the issue set (ops.FAMILIES)
  python tools/conformance --subset ci      # the pinned CI subset
  python tools/conformance --all            # the whole op_db
  python tools/conformance --ops sum,nn.functional.gelu --dtypes float32
  python tools/conformance --subset ci --compile --max-samples 5
  ... --json report.json --write-docs docs/conformance.md --grad --timeout 300

--write-docs keeps the data of the page's tables in docs/conformance.json and regenerates
the tables from it (docs.py); tests/python/test_conformance.py checks that they agree.

Modules: ops (what is swept: families, subsets, dtypes, tolerances), worker (the
subprocess that runs and compares samples), records (an op's record and the summary),
runner (the command line and the workers' supervision), docs (the page's tables).
"""
