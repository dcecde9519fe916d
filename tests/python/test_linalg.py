"""Linear-algebra ops lowered in csrc/ops/linalg*.cpp (trace, linalg.cross, cdist,
pdist, renorm, the factorizations and what follows from them), compared with CPU PyTorch forward and backward, in several dtypes, odd
sizes, broadcasting and every p-norm branch."""

import math

import pytest
import torch

from helpers import assert_same, rand, tol
from cpu_compare import check

pytestmark = pytest.mark.op_by_op  # op mode only (pyproject.toml)

FLOATS = [torch.float32, torch.float64, torch.bfloat16]


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32])
@pytest.mark.parametrize("shape", [(5, 5), (3, 7), (7, 2), (1, 1)])
def test_trace(dtype, shape):
    x = rand(shape, dtype)
    assert_same(torch.trace(x.to("tpu")), torch.trace(x), **tol(dtype))


def test_trace_rejects_bool_and_vectors_like_cpu():
    for x in (torch.ones(3, 3, dtype=torch.bool), torch.ones(3)):
        with pytest.raises((RuntimeError, NotImplementedError)):
            torch.trace(x)
        with pytest.raises((RuntimeError, NotImplementedError)):
            torch.trace(x.to("tpu")).cpu()


def test_trace_backward():
    x = torch.randn(4, 6, requires_grad=True)
    check(torch.trace, x)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_cross(dtype):
    a, b = rand((5, 3, 7), dtype, seed=1), rand((5, 3, 7), dtype, seed=2)
    assert_same(
        torch.linalg.cross(a.to("tpu"), b.to("tpu"), dim=1),
        torch.linalg.cross(a, b, dim=1),
        **tol(dtype),
    )
    # Broadcast operands, the default last dim, torch.cross and out=.
    c, d = rand((4, 1, 3), dtype, seed=3), rand((1, 2, 3), dtype, seed=4)
    assert_same(
        torch.linalg.cross(c.to("tpu"), d.to("tpu")), torch.linalg.cross(c, d), **tol(dtype)
    )
    assert_same(
        torch.cross(a.to("tpu"), b.to("tpu"), dim=1), torch.cross(a, b, dim=1), **tol(dtype)
    )
    out = torch.empty(0, dtype=dtype, device="tpu")
    torch.linalg.cross(c.to("tpu"), d.to("tpu"), out=out)
    assert_same(out, torch.linalg.cross(c, d), **tol(dtype))


def test_cross_backward_and_errors():
    a, b = torch.randn(6, 3, requires_grad=True), torch.randn(6, 3, requires_grad=True)
    check(torch.linalg.cross, a, b)
    with pytest.raises(RuntimeError):
        torch.linalg.cross(torch.randn(2, 4).to("tpu"), torch.randn(2, 4).to("tpu"))


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, 0.5, math.inf])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cdist(p, dtype):
    a, b = rand((2, 7, 5), dtype, seed=1), rand((2, 9, 5), dtype, seed=2)
    assert_same(torch.cdist(a.to("tpu"), b.to("tpu"), p=p), torch.cdist(a, b, p=p), **tol(dtype))


@pytest.mark.parametrize(
    "mode",
    [
        "use_mm_for_euclid_dist_if_necessary",
        "use_mm_for_euclid_dist",
        "donot_use_mm_for_euclid_dist",
    ],
)
def test_cdist_euclid_modes(mode):
    # 30 rows take the matrix-product form unless told not to; broadcast batch dims.
    a, b = torch.randn(3, 1, 30, 4, dtype=torch.float64), torch.randn(2, 11, 4, dtype=torch.float64)
    assert_same(
        torch.cdist(a.to("tpu"), b.to("tpu"), compute_mode=mode),
        torch.cdist(a, b, compute_mode=mode),
        rtol=1e-9,
        atol=1e-9,
    )


def test_cdist_empty():
    a, b = torch.randn(0, 3), torch.randn(4, 3)
    assert_same(torch.cdist(a.to("tpu"), b.to("tpu")), torch.cdist(a, b))


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 1.5, math.inf])
def test_pdist(p):
    x = torch.randn(7, 5, dtype=torch.float64)
    assert_same(
        torch.nn.functional.pdist(x.to("tpu"), p=p),
        torch.nn.functional.pdist(x, p=p),
        rtol=1e-9,
        atol=1e-9,
    )
    one = torch.randn(1, 3)
    assert_same(torch.nn.functional.pdist(one.to("tpu"), p=p), torch.nn.functional.pdist(one, p=p))


@pytest.mark.parametrize("p", [1, 2, 3, 0.5, math.inf])
@pytest.mark.parametrize("dtype", FLOATS)
def test_renorm(p, dtype):
    x = rand((5, 3, 4), dtype, seed=5, scale=2.0)
    for dim in (0, 1, -1):
        assert_same(
            torch.renorm(x.to("tpu"), p, dim, 1.5),
            torch.renorm(x, p, dim, 1.5),
            **tol(dtype, f32=2e-5),
        )
    y, yc = x.to("tpu"), x.clone()
    y.renorm_(2, 0, 0.7)
    yc.renorm_(2, 0, 0.7)
    assert_same(y, yc, **tol(dtype, f32=2e-5))


def test_renorm_backward():
    x = (torch.randn(4, 5) * 3).requires_grad_()
    check(lambda t: torch.renorm(t, 2, 0, 1.0), x)


def spd(batch, n, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(*batch, n, n, generator=g, dtype=torch.float64)
    return (a @ a.mT + n * torch.eye(n, dtype=torch.float64)).to(dtype)


def general(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


LINALG_TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float64: dict(rtol=1e-9, atol=1e-9)}
FACTOR_DTYPES = [torch.float32, torch.float64]


def same(fn, *args, dtype, backward=False):
    t = LINALG_TOL[dtype]
    outs_t = check(fn, *args, tol=t, backward=backward)
    return outs_t


@pytest.mark.parametrize("dtype", FACTOR_DTYPES)
@pytest.mark.parametrize("batch,n", [((), 1), ((), 5), ((3,), 4), ((2, 1), 7)])
def test_cholesky_family(dtype, batch, n):
    s = spd(batch, n, dtype)
    for upper in (False, True):
        same(lambda a: torch.linalg.cholesky(a, upper=upper), s, dtype=dtype)
        same(lambda a: torch.linalg.cholesky_ex(a, upper=upper), s, dtype=dtype)
        same(lambda a: torch.cholesky(a, upper), s, dtype=dtype)
        f = torch.linalg.cholesky(s, upper=upper)
        b = general((*batch, n, 3), dtype, seed=1)
        same(lambda x, y: torch.cholesky_solve(x, y, upper), b, f, dtype=dtype)
        same(lambda y: torch.cholesky_inverse(y, upper), f, dtype=dtype)


def test_cholesky_backward_and_errors():
    s = spd((2,), 4, torch.float64).requires_grad_()
    check(lambda a: torch.linalg.cholesky(a), s, tol=LINALG_TOL[torch.float64])
    # Not positive definite: info names the failing minor; cholesky raises as on CPU.
    bad = torch.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=torch.float64)
    assert (
        torch.linalg.cholesky_ex(bad.to("tpu")).info.item()
        == torch.linalg.cholesky_ex(bad).info.item()
    )
    with pytest.raises(RuntimeError):
        torch.linalg.cholesky(bad.to("tpu"))


@pytest.mark.parametrize("dtype", FACTOR_DTYPES)
def test_triangular_solves(dtype):
    a = torch.linalg.cholesky(spd((3,), 5, dtype)) + torch.eye(5, dtype=dtype)
    b = general((3, 5, 2), dtype, seed=2)
    for upper in (False, True):
        tri = a.mT.contiguous() if upper else a
        for unit in (False, True):
            same(
                lambda x, y: torch.linalg.solve_triangular(x, y, upper=upper, unitriangular=unit),
                tri,
                b,
                dtype=dtype,
            )
            same(
                lambda x, y: torch.linalg.solve_triangular(
                    x, y, upper=upper, left=False, unitriangular=unit
                ),
                tri,
                b.mT.contiguous(),
                dtype=dtype,
            )
            for transpose in (False, True):
                same(
                    lambda x, y: torch.triangular_solve(x, y, upper, transpose, unit),
                    b,
                    tri,
                    dtype=dtype,
                )
    # Broadcast batch dims.
    same(
        lambda x, y: torch.linalg.solve_triangular(x, y, upper=False),
        a[:1],
        general((4, 3, 5, 2), dtype),
        dtype=dtype,
    )


@pytest.mark.parametrize("dtype", FACTOR_DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (3, 4, 4), (2, 1, 6, 6)])
def test_lu_family(dtype, shape):
    a = general(shape, dtype, seed=3)
    same(torch.linalg.lu_factor, a, dtype=dtype)
    same(torch.linalg.lu_factor_ex, a, dtype=dtype)
    same(torch.linalg.lu, a, dtype=dtype)
    same(torch.linalg.det, a, dtype=dtype)
    same(torch.linalg.slogdet, a, dtype=dtype)
    same(torch.linalg.inv, a, dtype=dtype)
    same(torch.linalg.inv_ex, a, dtype=dtype)
    b = general((*shape[:-1], 3), dtype, seed=4)
    same(torch.linalg.solve, a, b, dtype=dtype)
    same(lambda x, y: torch.linalg.solve(x, y, left=False), a, b.mT.contiguous(), dtype=dtype)
    same(
        torch.linalg.solve, a, general(shape[:-1], dtype, seed=5), dtype=dtype
    )  # a batch of vectors
    lu, piv = torch.linalg.lu_factor(a)
    for left in (True, False):
        for adjoint in (False, True):
            rhs = b if left else b.mT.contiguous()
            same(
                lambda x, p, y: torch.linalg.lu_solve(x, p, y, left=left, adjoint=adjoint),
                lu,
                piv,
                rhs,
                dtype=dtype,
            )
    same(torch.lu_unpack, lu, piv, dtype=dtype)


@pytest.mark.parametrize("shape", [(4, 6), (6, 4), (2, 3, 5)])
def test_lu_rectangular(shape):
    a = general(shape, torch.float64, seed=6)
    same(torch.linalg.lu_factor, a, dtype=torch.float64)
    same(torch.linalg.lu, a, dtype=torch.float64)
    lu, piv = torch.linalg.lu_factor(a)
    same(torch.lu_unpack, lu, piv, dtype=torch.float64)


def test_lu_singular_by_invariants():
    # An exactly singular matrix: whether U's last pivot comes out as 0 or as a rounding
    # residue depends on the pivot order and the BLAS (MKL on Intel gives det -6.7e-16,
    # slogdet sign -1; an exact 0 gives sign 0 and -inf). Both are right, so check what
    # any backward-stable LU satisfies instead of LAPACK's bits.
    s = torch.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], dtype=torch.float64)
    n, eps = s.shape[-1], torch.finfo(s.dtype).eps
    norm = torch.linalg.matrix_norm(s).item()
    lu, pivots, info = (t.cpu() for t in torch.linalg.lu_factor_ex(s.to("tpu")))
    p, l, u = torch.lu_unpack(lu, pivots)
    torch.testing.assert_close(p @ l @ u, s, rtol=0, atol=4 * n * eps * norm)
    assert sorted(torch.argmax(p, 0).tolist()) == list(range(n))  # a permutation
    diag = u.diagonal()
    zero = (diag == 0).nonzero()
    assert info.item() == (zero[0].item() + 1 if len(zero) else 0)  # LAPACK's info rule
    assert diag.abs().min() <= 4 * n * eps * norm  # a pivot at rounding level
    det = torch.linalg.det(s.to("tpu")).item()
    assert abs(det) <= 4 * n * eps * norm**n
    sign, logabsdet = (t.item() for t in torch.linalg.slogdet(s.to("tpu")))
    if sign == 0:
        assert logabsdet == -math.inf
    else:
        assert abs(sign) == 1 and sign * math.exp(logabsdet) == pytest.approx(det, rel=1e-12)


def test_lu_backward():
    a = general((2, 4, 4), torch.float64, seed=7).requires_grad_()
    b = general((2, 4, 3), torch.float64, seed=8).requires_grad_()
    check(torch.linalg.det, a, tol=LINALG_TOL[torch.float64])
    check(torch.linalg.inv, a, tol=LINALG_TOL[torch.float64])
    check(torch.linalg.solve, a, b, tol=LINALG_TOL[torch.float64])


# ---- QR, eigh, SVD and what PyTorch builds from them; matrix_exp ----------------------

DECOMP_SHAPES = [(1, 1), (5, 5), (3, 4, 4), (2, 1, 6, 3), (3, 5), (1, 4)]


def same_up_to_sign(t, c, tol, vh_t=None, vh_c=None):
    """Columns of t (and, with the same signs, rows of vh_t) equal CPU's up to each
    column's sign: eigen- and singular vectors are unique only up to sign."""
    host = t.cpu()
    s = torch.sign((host * c).sum(-2, keepdim=True))
    s[s == 0] = 1
    torch.testing.assert_close(host * s, c, **tol)
    if vh_t is not None:
        torch.testing.assert_close(vh_t.cpu() * s.mT, vh_c, **tol)


@pytest.mark.parametrize("dtype", FACTOR_DTYPES)
@pytest.mark.parametrize("shape", DECOMP_SHAPES)
def test_qr_family(dtype, shape):
    a = general(shape, dtype, seed=9)
    same(torch.geqrf, a, dtype=dtype)  # LAPACK's reflectors and signs
    for mode in ("reduced", "complete", "r"):
        same(lambda x: torch.linalg.qr(x, mode=mode), a, dtype=dtype)
    same(torch.qr, a, dtype=dtype)
    g, tau = torch.geqrf(a)
    m, n = shape[-2:]
    h = g if m >= n else g[..., :m].contiguous()
    same(torch.linalg.householder_product, h, tau, dtype=dtype)
    same(torch.orgqr, h, tau, dtype=dtype)
    c = general((*shape[:-2], m, 3), dtype, seed=10)
    for left in (True, False):
        for transpose in (False, True):
            rhs = c if left else c.mT.contiguous()
            same(
                lambda x, t, y: torch.ormqr(x, t, y, left=left, transpose=transpose),
                g,
                tau,
                rhs,
                dtype=dtype,
            )


def test_qr_backward_and_empty():
    for shape in ((5, 5), (2, 7, 4)):
        a = general(shape, torch.float64, seed=11).requires_grad_()
        check(torch.linalg.qr, a, tol=LINALG_TOL[torch.float64])
    z = torch.zeros(3, 0)
    same(lambda x: torch.linalg.qr(x, mode="complete"), z, dtype=torch.float32)
    same(torch.geqrf, z, dtype=torch.float32)


@pytest.mark.parametrize("dtype", FACTOR_DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (5, 5), (3, 4, 4), (2, 1, 7, 7)])
def test_eigh(dtype, shape):
    a = general(shape, dtype, seed=12)  # not symmetric: UPLO picks the triangle
    for uplo in ("L", "U"):
        w, v = torch.linalg.eigh(a, UPLO=uplo)
        wt, vt = torch.linalg.eigh(a.to("tpu"), UPLO=uplo)
        assert_same(wt, w, **LINALG_TOL[dtype])
        same_up_to_sign(vt, v, LINALG_TOL[dtype])
        same(lambda x: torch.linalg.eigvalsh(x, UPLO=uplo), a, dtype=dtype)


def test_eigh_repeated_and_backward():
    # Repeated eigenvalues (the identity, a rank-1 update) still ascend and reconstruct.
    u = general((6, 1), torch.float64, seed=13)
    for a in (torch.eye(4, dtype=torch.float64), u @ u.mT):
        same(torch.linalg.eigvalsh, a, dtype=torch.float64)
        w, v = torch.linalg.eigh(a.to("tpu"))
        torch.testing.assert_close(((v * w.unsqueeze(-2)) @ v.mT).cpu(), a)
    s = general((2, 5, 5), torch.float64, seed=14)
    s = (s + s.mT).requires_grad_()
    check(torch.linalg.eigvalsh, s, tol=LINALG_TOL[torch.float64])
    # A sign-invariant function of the eigenvectors.
    check(lambda x: torch.linalg.eigh(x)[1].abs().sum(-1), s, tol=LINALG_TOL[torch.float64])


@pytest.mark.parametrize("dtype", FACTOR_DTYPES)
@pytest.mark.parametrize("shape", DECOMP_SHAPES + [(4, 1)])
def test_svd(dtype, shape):
    a = general(shape, dtype, seed=15)
    t = LINALG_TOL[dtype]
    same(torch.linalg.svdvals, a, dtype=dtype)
    for full in (False, True):
        u, s, vh = torch.linalg.svd(a, full_matrices=full)
        ut, st, vht = torch.linalg.svd(a.to("tpu"), full_matrices=full)
        assert_same(st, s, **t)
        k = s.shape[-1]
        same_up_to_sign(ut[..., :k], u[..., :k], t, vht[..., :k, :], vh[..., :k, :])
        # The completed bases are orthonormal.
        for q in (ut, vht.mT):
            eye = torch.eye(q.shape[-1], dtype=dtype).expand(
                q.shape[:-2] + (q.shape[-1], q.shape[-1])
            )
            torch.testing.assert_close((q.mT @ q).cpu(), eye, **t)
    u, s, v = torch.svd(a.to("tpu"))
    assert_same(s, torch.svd(a)[1], **t)


def test_svd_derived_ops():
    a = general((3, 5, 4), torch.float64, seed=16)
    sq = general((2, 4, 4), torch.float64, seed=17)
    low = general((5, 2), torch.float64, seed=18) @ general(
        (2, 6), torch.float64, seed=19
    )  # rank 2
    for x in (a, sq, low):
        same(torch.linalg.pinv, x, dtype=torch.float64)
        same(torch.pinverse, x, dtype=torch.float64)
        same(torch.linalg.matrix_rank, x, dtype=torch.float64)
        for ord in (2, -2, "nuc"):
            same(lambda y: torch.linalg.matrix_norm(y, ord=ord), x, dtype=torch.float64)
        same(lambda y: torch.norm(y, p="nuc", dim=(-2, -1)), x, dtype=torch.float64)
    same(torch.linalg.cond, sq, dtype=torch.float64)
    same(lambda y: torch.linalg.pinv(y, hermitian=True), sq + sq.mT, dtype=torch.float64)
    same(lambda y: torch.linalg.matrix_rank(y, hermitian=True), sq + sq.mT, dtype=torch.float64)
    # Backward through the singular values and the pseudo-inverse.
    check(torch.linalg.svdvals, a.clone().requires_grad_(), tol=LINALG_TOL[torch.float64])
    check(torch.linalg.pinv, a.clone().requires_grad_(), tol=LINALG_TOL[torch.float64])


@pytest.mark.parametrize("dtype", FACTOR_DTYPES)
@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (2, 5), (2, 7, 4), (3, 2, 6)])
def test_lstsq(dtype, shape):
    a = general(shape, dtype, seed=24)
    b = general((*shape[:-1], 3), dtype, seed=25)
    for driver in ("gels", "gelsy", "gelsd", "gelss"):
        same(lambda x, y: torch.linalg.lstsq(x, y, driver=driver), a, b, dtype=dtype)
    same(
        lambda x, y: torch.linalg.lstsq(x, y, driver="gels"),
        a,
        general(shape[:-1], dtype, seed=26),
        dtype=dtype,
    )  # a batch of vectors
    # A large rcond drops singular values. CPU then leaves the residuals empty, which only the
    # values tell; ours keeps them (sized by the meta kernel), so they are not compared.
    same(
        lambda x, y: (lambda r: (r.solution, r.rank, r.singular_values))(
            torch.linalg.lstsq(x, y, rcond=0.5, driver="gelsd")
        ),
        a,
        b,
        dtype=dtype,
    )


def test_lstsq_rank_deficient_and_backward():
    # Rank 2: gelsd drops the tiny singular value, as CPU's.
    low = general((6, 2), torch.float64, seed=27) @ general((2, 4), torch.float64, seed=28)
    b = general((6, 2), torch.float64, seed=29)
    x, _, rank, sv = torch.linalg.lstsq(low.to("tpu"), b.to("tpu"), driver="gelsd")
    xc, _, rc, svc = torch.linalg.lstsq(low, b, driver="gelsd")
    assert rank.item() == rc.item() == 2
    assert_same(x, xc, **LINALG_TOL[torch.float64])
    a = general((5, 3), torch.float64, seed=30).requires_grad_()
    check(
        lambda x, y: torch.linalg.lstsq(x, y, driver="gels").solution,
        a,
        b[:5].clone().requires_grad_(),
        tol=LINALG_TOL[torch.float64],
    )


@pytest.mark.parametrize("dtype", FACTOR_DTYPES)
@pytest.mark.parametrize(
    "shape,scale", [((1, 1), 1.0), ((5, 5), 0.1), ((3, 4, 4), 1.0), ((2, 6, 6), 3.0)]
)
def test_matrix_exp(dtype, shape, scale):
    a = general(shape, dtype, seed=20) * scale
    t = LINALG_TOL[dtype]
    check(torch.linalg.matrix_exp, a, tol=t, backward=False)
    check(torch.matrix_exp, torch.zeros(2, 3, 3, dtype=dtype), tol=t, backward=False)


def test_matrix_exp_half_types():
    # bf16/f16 compute in f32 and round once. CPU's kernel computes in the low type and
    # gives NaN for these inputs (torch 2.13), so the reference is its f32 result, rounded.
    for dtype in (torch.bfloat16, torch.float16):
        a = general((3, 4, 4), dtype, seed=23) * 0.5
        expected = torch.linalg.matrix_exp(a.float()).to(dtype)
        assert_same(torch.linalg.matrix_exp(a.to("tpu")), expected, rtol=1e-2, atol=1e-2)


def test_matrix_exp_backward():
    a = (general((2, 4, 4), torch.float64, seed=21) * 0.5).requires_grad_()
    check(torch.linalg.matrix_exp, a, tol=LINALG_TOL[torch.float64])


def test_decompositions_compiled():
    def fn(x):
        q, r = torch.linalg.qr(x)
        w = torch.linalg.eigvalsh(x.mT @ x)
        return q, r, w, torch.linalg.svdvals(x), torch.linalg.matrix_exp(x * 0.1)

    a = general((2, 5, 5), torch.float32, seed=22)
    got = torch.compile(fn, backend="tpu")(a.to("tpu"))
    for g, e in zip(got, fn(a)):
        assert_same(g, e, **LINALG_TOL[torch.float32])
