"""Densification ops: parameter edits, Adam moment alignment, MCMC relocation maths."""

from __future__ import annotations

import math

import pytest
import torch

from pointrix_lite.strategy.ops import (
    binomial_table,
    compute_relocation,
    duplicate,
    inject_noise_to_position,
    relocate,
    remove,
    reset_opa,
    sample_add,
    split,
)
from tests.model.helpers import adam_rows_match, make_model, take_adam_step


def _trained(n: int = 12):
    model = make_model(n, sh_degree=1)
    opt = model.create_optimizer(100)
    take_adam_step(model, opt)
    before = {k: v.detach().clone() for k, v in model.params.items()}
    moments = {
        g["name"]: {k: opt.state[g["params"][0]][k].clone() for k in ("exp_avg", "exp_avg_sq")}
        for g in opt.param_groups
    }
    return model, opt, before, moments


def _moments(opt, model, name, key="exp_avg"):
    return opt.state[model.params[name]][key]


def test_duplicate_appends_copies_with_zero_moments() -> None:
    model, opt, before, moments = _trained()
    mask = torch.zeros(12, dtype=torch.bool)
    mask[[2, 7]] = True
    state = {"grad2d": torch.arange(12.0), "radii": None}
    duplicate(model.params, opt, state, mask)
    assert model.num_gaussians == 14
    adam_rows_match(model, opt)
    for name, old in before.items():
        torch.testing.assert_close(model.params[name].detach(), torch.cat([old, old[[2, 7]]]))
        for key in ("exp_avg", "exp_avg_sq"):
            m = _moments(opt, model, name, key)
            torch.testing.assert_close(m[:12], moments[name][key])
            assert (m[12:] == 0).all()
        assert int(opt.state[model.params[name]]["step"]) == 1
    torch.testing.assert_close(state["grad2d"], torch.tensor([*range(12), 2, 7], dtype=torch.float32))


def test_remove_drops_rows_and_keeps_survivor_moments() -> None:
    model, opt, before, moments = _trained()
    mask = torch.zeros(12, dtype=torch.bool)
    mask[[0, 5, 11]] = True
    keep = (~mask).nonzero()[:, 0]
    state = {"count": torch.arange(12.0)}
    remove(model.params, opt, state, mask)
    assert model.num_gaussians == 9
    adam_rows_match(model, opt)
    for name, old in before.items():
        torch.testing.assert_close(model.params[name].detach(), old[keep])
        torch.testing.assert_close(_moments(opt, model, name, "exp_avg_sq"), moments[name]["exp_avg_sq"][keep])
    torch.testing.assert_close(state["count"], keep.float())


def test_split_samples_from_the_gaussian_and_shrinks_scale() -> None:
    n = 4000
    model = make_model(n, sh_degree=0)
    opt = model.create_optimizer(100)
    take_adam_step(model, opt)
    scales = torch.tensor([0.3, 0.1, 0.02])
    angle = math.pi / 3  # rotation about z, wxyz
    quat = torch.tensor([math.cos(angle / 2), 0.0, 0.0, math.sin(angle / 2)]) * 2.0  # unnormalised on purpose
    with torch.no_grad():
        model.params["scales"][:] = scales.log()
        model.params["quats"][:] = quat
        model.params["means"][:] = torch.tensor([1.0, -2.0, 0.5])
    before = {k: v.detach().clone() for k, v in model.params.items()}
    mask = torch.ones(n, dtype=torch.bool)
    mask[:10] = False  # ten survivors stay at the front, in order
    torch.manual_seed(0)
    split(model.params, opt, None, mask)
    assert model.num_gaussians == 10 + 2 * (n - 10)
    adam_rows_match(model, opt)
    torch.testing.assert_close(model.params["means"][:10].detach(), before["means"][:10])
    assert (_moments(opt, model, "means")[10:] == 0).all()
    torch.testing.assert_close(model.params["scales"][10:].detach(), (scales / 1.6).log().expand(2 * (n - 10), 3))
    torch.testing.assert_close(model.params["opacities"][10:].detach(), before["opacities"][mask].repeat(2))
    # New positions are samples of N(mean, R S^2 R^T): check their empirical covariance.
    offsets = model.params["means"][10:].detach().double() - torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    c, s = math.cos(angle), math.sin(angle)
    rot = torch.tensor([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    expected_cov = rot @ torch.diag(scales.double() ** 2) @ rot.T
    cov = offsets.T @ offsets / len(offsets)
    assert offsets.mean(0).abs().max() < 0.02
    torch.testing.assert_close(cov, expected_cov, atol=3e-3, rtol=0.06)


def test_reset_opacity_clamps_and_zeros_only_opacity_moments() -> None:
    model, opt, before, moments = _trained()
    with torch.no_grad():
        model.params["opacities"][:6] = torch.logit(torch.tensor(0.5))
        model.params["opacities"][6:] = torch.logit(torch.tensor(0.001))
    reset_opa(model.params, opt, None, value=0.01)
    opa = torch.sigmoid(model.params["opacities"].detach())
    torch.testing.assert_close(opa[:6], torch.full((6,), 0.01))
    torch.testing.assert_close(opa[6:], torch.full((6,), 0.001))
    assert (_moments(opt, model, "opacities") == 0).all()
    torch.testing.assert_close(_moments(opt, model, "means"), moments["means"]["exp_avg"])
    adam_rows_match(model, opt)


def _relocation_reference(opa: float, scale: list[float], n: int, binoms: torch.Tensor) -> tuple[float, list[float]]:
    """Line-by-line transcription of gsplat's relocation_kernel (RelocationCUDA.cu)."""
    new_opa = 1.0 - (1.0 - opa) ** (1.0 / n)
    denom = 0.0
    for i in range(1, n + 1):
        for k in range(i):
            denom += float(binoms[i - 1, k]) * ((-1.0) ** k / math.sqrt(k + 1)) * new_opa ** (k + 1)
    return new_opa, [opa / denom * s for s in scale]


def test_compute_relocation_matches_the_cuda_kernel_formula() -> None:
    binoms = binomial_table()
    assert binoms[5, 2] == 10 and binoms[50, 25] == pytest.approx(math.comb(50, 25), rel=1e-6)
    opa = torch.tensor([0.9, 0.3, 0.05, 0.7, 0.999])
    scales = torch.rand(5, 3) + 0.1
    ratios = torch.tensor([1, 2, 5, 17, 51])
    new_opa, new_scales = compute_relocation(opa, scales, ratios, binoms)
    for i in range(5):
        ref_opa, ref_scale = _relocation_reference(float(opa[i]), scales[i].tolist(), int(ratios[i]), binoms)
        assert float(new_opa[i]) == pytest.approx(ref_opa, rel=1e-5)
        assert new_scales[i].tolist() == pytest.approx(ref_scale, rel=1e-4)
    # n copies together keep the original opacity at the centre: 1 - (1 - o')^n = o.
    torch.testing.assert_close(1 - (1 - new_opa.double()) ** ratios.double(), opa.double(), rtol=1e-5, atol=1e-6)
    # A single "copy" is the Gaussian itself.
    torch.testing.assert_close(new_scales[0], scales[0])


def test_relocate_moves_dead_onto_live_and_keeps_count() -> None:
    torch.manual_seed(0)
    model, opt, before, moments = _trained(20)
    dead = torch.zeros(20, dtype=torch.bool)
    dead[[1, 4, 9, 15]] = True
    with torch.no_grad():
        model.params["opacities"][dead] = torch.logit(torch.tensor(0.001))
        model.params["opacities"][~dead] = torch.logit(torch.rand(16) * 0.8 + 0.1)
    before = {k: v.detach().clone() for k, v in model.params.items()}
    relocate(model.params, opt, None, dead, binomial_table(), min_opacity=0.005)
    assert model.num_gaussians == 20
    adam_rows_match(model, opt)
    means = model.params["means"].detach()
    alive_idx = (~dead).nonzero()[:, 0]
    sources = set()
    for d in dead.nonzero()[:, 0].tolist():
        match = [int(a) for a in alive_idx if torch.equal(means[d], before["means"][a])]
        assert len(match) == 1, "each dead Gaussian sits exactly on one live Gaussian"
        a = match[0]
        sources.add(a)
        for name in before:
            torch.testing.assert_close(model.params[name][d].detach(), model.params[name][a].detach())
    assert (torch.sigmoid(model.params["opacities"].detach()) > 0.005 - 1e-7).all()
    for a in sources:  # the source shares its opacity with its copies: it went down
        assert model.params["opacities"][a] < before["opacities"][a]
        assert (_moments(opt, model, "means")[a] == 0).all()
    untouched = [i for i in alive_idx.tolist() if i not in sources]
    torch.testing.assert_close(model.params["opacities"][untouched].detach(), before["opacities"][untouched])
    torch.testing.assert_close(_moments(opt, model, "scales")[untouched], moments["scales"]["exp_avg"][untouched])


def test_sample_add_appends_copies() -> None:
    torch.manual_seed(1)
    model, opt, before, moments = _trained(10)
    sample_add(model.params, opt, None, 4, binomial_table(), min_opacity=0.005)
    assert model.num_gaussians == 14
    adam_rows_match(model, opt)
    means = model.params["means"].detach()
    for j in range(10, 14):
        src = [i for i in range(10) if torch.equal(means[j], before["means"][i])]
        assert len(src) == 1
        torch.testing.assert_close(model.params["scales"][j], model.params["scales"][src[0]])
        assert (_moments(opt, model, "quats")[j] == 0).all()


def test_noise_moves_transparent_gaussians_along_their_covariance() -> None:
    torch.manual_seed(2)
    n = 3000
    model = make_model(n, sh_degree=0)
    with torch.no_grad():
        model.params["scales"][:] = torch.tensor([0.2, 0.2, 0.01]).log()
        model.params["quats"][:] = torch.tensor([1.0, 0, 0, 0])
        model.params["opacities"][: n // 2] = torch.logit(torch.tensor(0.0001))  # gate ~ sigmoid(0.49)
        model.params["opacities"][n // 2 :] = torch.logit(torch.tensor(0.9))  # gate ~ e^-90
    before = model.params["means"].detach().clone()
    inject_noise_to_position(model.params, scaler=10.0)
    delta = model.params["means"].detach() - before
    assert delta[n // 2 :].abs().max() < 1e-12
    gate = torch.sigmoid(torch.tensor(100.0 * (1 - 0.0001 - 0.995)))
    std = delta[: n // 2].std(dim=0)
    expected = torch.tensor([0.04, 0.04, 0.0001]) * gate * 10.0
    torch.testing.assert_close(std, expected, rtol=0.08, atol=0)
