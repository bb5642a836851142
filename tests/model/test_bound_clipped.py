"""``model.bound_clipped``: a photo's channel at 255 (or 0) bounds the render from one side instead of
fixing it; everywhere else the loss is the plain one."""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from pointrix_lite.engine.hooks import AppearanceOptHook
from pointrix_lite.model.loss import bound_clipped

from .helpers import make_model, make_view

H, W = 16, 20


def photo_and_render(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A uint8 photo with clipped patches at 255 and at 0, and a render ``[1, H, W, 3]`` that overshoots
    [0, 1] in places (both over the clipped patches and where the photo is not clipped)."""
    g = torch.Generator().manual_seed(seed)
    photo = torch.randint(1, 255, (H, W, 3), generator=g, dtype=torch.uint8)
    photo[2:8, 3:12] = 255
    photo[10:14, 4:9, 1] = 0  # one channel crushed to black
    render = torch.rand(1, H, W, 3, generator=g) * 1.6 - 0.3
    return photo, render


def hinge_l1(render: torch.Tensor, photo: torch.Tensor) -> torch.Tensor:
    """The reference, written as the inequality it stands for: at 255 the scene was >= 1, so only a
    render below 1 is an error; at 0 it was <= 0, so only a render above 0 is; elsewhere |render - photo|."""
    gt = photo.double() / 255.0
    r = render.double()
    err = torch.where(photo == 255, torch.relu(1.0 - r), torch.where(photo == 0, torch.relu(r), (r - gt).abs()))
    return err.mean()


def model_loss(photo: torch.Tensor, render: torch.Tensor, bound: bool, float_image: bool = False):
    """GaussianModel's L1 term on a given render (a leaf, so its gradient is read back per pixel)."""
    model = make_model(8, sh_degree=0, ssim_lambda=0.0, bound_clipped=bound)
    view = make_view(photo)
    if float_image:  # a downscaled view holds float block means, 0..255
        view = replace(view, image=photo.float())
    rgb = render.clone().requires_grad_(True)
    out = model.get_loss_dict({"rgb": rgb}, [view])
    out["loss"].backward()
    return out["loss"].detach(), rgb.grad[0]


@pytest.mark.parametrize("float_image", [False, True])
def test_loss_is_the_one_sided_error_at_clipped_pixels(float_image):
    photo, render = photo_and_render()
    loss, grad = model_loss(photo, render, bound=True, float_image=float_image)
    assert float(loss) == pytest.approx(float(hinge_l1(render, photo)), rel=1e-5)
    top, bottom, r = photo == 255, photo == 0, render[0]
    # a render beyond the clip sends nothing; short of it, the full L1 gradient towards it
    assert torch.all(grad[top & (r > 1)] == 0) and torch.all(grad[bottom & (r < 0)] == 0)
    assert torch.all(grad[top & (r < 1)] < 0) and torch.all(grad[bottom & (r > 0)] > 0)
    # where the photo is not clipped a render above 1 is pulled down (a clamp everywhere would not)
    free = ~top & ~bottom & (r > 1)
    assert free.any() and torch.all(grad[free] > 0)
    plain, plain_grad = model_loss(photo, render, bound=False, float_image=float_image)
    assert float(plain) > float(loss)  # the test can fail: without the option the clipped pixels count
    torch.testing.assert_close(grad[~top & ~bottom], plain_grad[~top & ~bottom])


def test_photo_without_clipped_pixels_trains_as_before():
    photo, render = photo_and_render(seed=1)
    photo = photo.clamp(1, 254)
    for ssim_lambda in (0.0, 0.2):
        model = make_model(8, sh_degree=0, ssim_lambda=ssim_lambda, bound_clipped=True)
        plain = make_model(8, sh_degree=0, ssim_lambda=ssim_lambda)
        view = make_view(photo)
        a = model.get_loss_dict({"rgb": render}, [view])["loss"]
        b = plain.get_loss_dict({"rgb": render}, [view])["loss"]
        assert torch.equal(a, b)


def test_an_over_exposed_photo_does_not_pull_the_scene_to_its_clip():
    """One colour seen by two photos: one exposed 1.5x (its 1.2 clipped to 1.0), one at 1x showing 0.8.
    Fitted through the known gains, the plain L1 settles between the two stories (at 1/1.5 the clipped
    photo is matched exactly); bounded, the clipped photo agrees with 0.8 and the colour lands there."""
    truth, gains = 0.8, torch.tensor([1.5, 1.0])
    photos = (torch.clamp(truth * gains, 0, 1) * 255).round().to(torch.uint8)[:, None].expand(2, 3)

    def fit(bound: bool) -> float:
        colour = torch.full((3,), 0.5, requires_grad=True)
        opt = torch.optim.Adam([colour], lr=0.01)
        for _ in range(600):
            render = colour[None] * gains[:, None]  # each photo's exposure applied, as AppearanceOptHook does
            if bound:
                render = bound_clipped(render, photos)
            loss = (render - photos.float() / 255.0).abs().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return float(colour.detach().mean())

    assert fit(bound=True) == pytest.approx(truth, abs=0.01)
    assert fit(bound=False) < truth - 0.08  # the clip learned as the scene's colour


def test_the_bound_applies_to_the_render_in_the_photos_colours():
    """Under AppearanceOptHook the loss compares ``color_transform(render)``: the clip is the photo's, so
    the bound is on the transformed render (a 1.5x exposure takes a render of 0.8 past the clip)."""
    photo, render = photo_and_render(seed=2)
    model = make_model(8, sh_degree=0, ssim_lambda=0.0, bound_clipped=True)
    view = replace(make_view(photo), color_transform=lambda rgb: 1.5 * rgb)
    rgb = render.clone().requires_grad_(True)
    loss = model.get_loss_dict({"rgb": rgb}, [view])["loss"]
    loss.backward()
    assert float(loss.detach()) == pytest.approx(float(hinge_l1(1.5 * render, photo)), rel=1e-5)
    top, r = photo == 255, render[0]
    assert torch.all(rgb.grad[0][top & (1.5 * r > 1)] == 0) and torch.all(rgb.grad[0][top & (1.5 * r < 1)] < 0)
    assert (top & (r < 1) & (1.5 * r > 1)).any()  # pixels the transform, not the render alone, takes past it


class _Trainer:
    """What AppearanceOptHook.before_run reads of the trainer (hooks hold a weak reference to it)."""

    def __init__(self, model, views) -> None:
        self.model, self.dataset = model, SimpleNamespace(train_views=views)
        self.device, self.effective_batch_size, self.global_step = torch.device("cpu"), 1, 0


@pytest.mark.parametrize("bound", [False, True])
def test_appearance_hook_leaves_the_clip_to_a_model_that_bounds_clipped_pixels(bound):
    """``clip: true`` clamps the transformed render everywhere; under ``model.bound_clipped`` the model's
    loss bounds the clipped pixels itself, so the hook hands it the render unclamped: a render above 1
    where the photo is not clipped then gets a gradient back down (under the clamp it gets none)."""
    photo = torch.full((H, W, 3), 200, dtype=torch.uint8)  # nothing clipped
    model = make_model(8, sh_degree=0, ssim_lambda=0.0, bound_clipped=bound)
    views = [make_view(photo, index=i) for i in range(2)]
    trainer = _Trainer(model, views)
    hook = AppearanceOptHook(AppearanceOptHook.Config(clip=True))
    hook.trainer = trainer
    hook.before_run()
    with torch.no_grad():
        hook.correction.delta[1, :3] = math.log(1.5)  # view 1 is exposed 1.5x
    batch = list(views)
    hook.before_train_iter(0, batch)
    rgb = torch.full((1, H, W, 3), 0.8, requires_grad=True)  # 1.2 in view 1's colours, its photo 0.78
    model.get_loss_dict({"rgb": rgb}, [batch[1]])["loss"].backward()
    if bound:
        assert torch.all(rgb.grad > 0)  # pulled down towards the photo's 0.78 / 1.5
    else:
        assert torch.all(rgb.grad == 0)  # the clamp's dead zone


def test_the_bound_holds_on_the_masked_path():
    """A view with a mask takes the masked loss (one pass of the native kernel with the mask as an input):
    the bounded L1 is the hinge over the kept pixels alone."""
    photo, render = photo_and_render(seed=4)
    mask = torch.ones(H, W, dtype=torch.bool)
    mask[:, : W // 3] = False  # drops part of the clipped patch too
    model = make_model(8, sh_degree=0, ssim_lambda=0.0, bound_clipped=True)
    view = replace(make_view(photo), mask=mask)
    loss = model.get_loss_dict({"rgb": render}, [view])["loss"]
    gt, r = photo.double() / 255.0, render[0].double()
    err = torch.where(photo == 255, torch.relu(1.0 - r), torch.where(photo == 0, torch.relu(r), (r - gt).abs()))
    assert float(loss) == pytest.approx(float(err[mask].mean()), rel=1e-5)
