"""The 3D Gaussian model: raw parameters, activations, loss/metrics, optimizer and schedule."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor, nn

from ..config import OptionError
from ..data.seeding import SeedingConfig
from ..errors import CheckpointError
from ..registry import MODELS
from .optimizer import LearningRates, build_adam, exponential_lr

PARAM_NAMES = ("means", "scales", "quats", "opacities", "sh0", "shN")


def num_sh_bases(sh_degree: int) -> int:
    """K = (degree + 1)^2 SH coefficients per colour channel."""
    return (sh_degree + 1) ** 2


MAX_SH_DEGREE = 4  # the highest degree gsplat (and both CPU backends) evaluate


LPIPS_KEYS = {  # lpips_net -> (metrics key, backbone) pairs
    "both": (("lpips", "alex"), ("lpips_vgg", "vgg")),
    "alex": (("lpips", "alex"),),
    "vgg": (("lpips_vgg", "vgg"),),
}


def check_model_config(cfg: Any) -> None:
    """Reject values that would crash later (possibly hours into a run) with a one-line ConfigError."""

    def bad(key: str, problem: str) -> None:
        raise OptionError(key, problem, "model")

    if not 0 <= cfg.sh_degree <= MAX_SH_DEGREE:
        bad("sh_degree", f"must be in 0..{MAX_SH_DEGREE}, got {cfg.sh_degree}")
    if cfg.sh_degree_interval < 1:
        bad("sh_degree_interval", f"must be >= 1, got {cfg.sh_degree_interval}")
    if cfg.sh_rest_update_every < 1:
        bad("sh_rest_update_every", f"must be >= 1, got {cfg.sh_rest_update_every}")
    if not 0.0 < cfg.init_opacity < 1.0:
        bad("init_opacity", f"must be in (0, 1) (it is stored as a logit), got {cfg.init_opacity}")
    if cfg.init_scale <= 0.0:
        bad("init_scale", f"must be positive, got {cfg.init_scale}")
    if not cfg.flatten_weight >= 0.0:
        bad("flatten_weight", f"must be >= 0, got {cfg.flatten_weight}")
    if not cfg.normal_consistency_weight >= 0.0:
        bad("normal_consistency_weight", f"must be >= 0, got {cfg.normal_consistency_weight}")
    if not 0.0 <= cfg.normal_consistency_from <= 1.0:
        bad("normal_consistency_from", f"must be a share of the steps in [0, 1], got {cfg.normal_consistency_from}")
    if cfg.context and cfg.normal_consistency_weight > 0:
        bad("context", "normal_consistency_weight blends the model's own normals only: set one of the two")
    if cfg.init_random_quats and cfg.init_oriented:
        bad("init_oriented", "init_random_quats and init_oriented both choose the initial rotations: set one")
    if cfg.init_num_points < 1:
        bad("init_num_points", f"must be >= 1, got {cfg.init_num_points}")
    if not cfg.init_extent > 0.0:
        bad("init_extent", f"must be positive, got {cfg.init_extent}")
    if not 0.0 < cfg.means_lr_final_factor <= 1.0:
        bad("means_lr_final_factor", f"must be in (0, 1], got {cfg.means_lr_final_factor}")
    if not 0.0 <= cfg.ssim_lambda <= 1.0:
        bad("ssim_lambda", f"must be in [0, 1], got {cfg.ssim_lambda}")
    for name, value in vars(cfg.lr).items():
        if not value >= 0.0:
            bad(f"lr.{name}", f"must be >= 0, got {value}")
    if cfg.lpips_net not in LPIPS_KEYS:  # YAML is checked against the Literal; a config built in Python is not
        bad("lpips_net", f"expected one of 'both', 'alex', 'vgg', got {cfg.lpips_net!r}")
    from ..metrics.backbone_download import download_enabled

    download_enabled()  # a misspelt POINTRIX_LPIPS_DOWNLOAD fails now, not at the first validation


def activated(raw: Mapping[str, Tensor], sh_rest: Tensor | None = None) -> dict[str, Tensor]:
    """Raw 3DGS parameters (``means``, ``quats``, ``scales`` log, ``opacities`` logit, ``sh0``, ``shN``; the
    model's and a PLY's layout) as the rasterizer takes them: ``means [N,3]``, ``quats [N,4]``, ``scales [N,3]``
    (exp), ``opacities [N]`` (sigmoid), ``colors [N,K,3]`` (``sh0`` then ``sh_rest``, ``shN`` by default)."""
    return {
        "means": raw["means"],
        "quats": raw["quats"],
        "scales": torch.exp(raw["scales"]),
        "opacities": torch.sigmoid(raw["opacities"]),
        "colors": torch.cat([raw["sh0"], raw["shN"] if sh_rest is None else sh_rest], dim=1),
    }


@MODELS.register()
class GaussianModel(nn.Module):
    """3D Gaussians stored pre-activation, named as gsplat names them.

    ``params`` holds ``means [N,3]``, ``scales [N,3]`` (log), ``quats [N,4]`` (wxyz, unnormalised;
    the rasterizer normalises), ``opacities [N]`` (logit), ``sh0 [N,1,3]`` (SH DC) and
    ``shN [N,K-1,3]`` (higher bands), K = (sh_degree + 1)^2.

    Args:
        config: Options, see :class:`GaussianModel.Config`.
        dataset: Optional scene; its ``point_cloud`` seeds the Gaussians and its ``scene_extent``
            scales the position learning rate. Without one (or without a point cloud) the model
            starts from ``init_num_points`` random points in a cube.
    """

    # get_loss_dict reads only render_out["rgb"]: training steps need no depth channel (the trainer
    # asks the renderer for depth=False). A subclass whose loss reads depth sets this True.
    train_depth: bool = False

    @dataclass
    class Config:
        sh_degree: int = 3
        sh_degree_interval: int = 1000  # raise the active SH degree by one every this many steps
        # Higher SH bands (shN) get a gradient and an Adam step only on steps divisible by this
        # (Taming-3DGS's sh_lower); between those steps they are constants. Depends on the step
        # alone, so a resumed run takes the same updates.
        sh_rest_update_every: int = 1
        init_num_points: int = 100_000  # random init only
        init_extent: float = 3.0  # random init: cube half-side, in units of the scene extent (gsplat)
        init_opacity: float = 0.1
        init_scale: float = 1.0  # multiplier on the mean distance to the 3 nearest neighbours
        init_random_quats: bool = False  # gsplat draws random rotations; INRIA starts at identity
        # Start each Gaussian's axes along the principal axes of its 16 nearest initial points (the
        # last along the local surface normal): a Gaussian on a surface flattens onto it by shrinking one
        # scale, in whatever frame the scene comes (identity axes favour scenes aligned with the world axes).
        init_oriented: bool = False
        # Points added to the data set's cloud before the Gaussians are made from it: plane-sweep depth
        # where structure from motion found nothing, a far shell for the sky (data/seeding/; applied by
        # engine/build.py, which keeps them in exp_dir for a resumed run).
        seeding: SeedingConfig = field(default_factory=SeedingConfig)
        seed: int = 0  # random init points and rotations
        lr: LearningRates = field(default_factory=LearningRates)
        means_lr_final_factor: float = 0.01  # means lr decays exponentially to this fraction at max_steps
        ssim_lambda: float = 0.2  # loss = (1 - l) * L1 + l * (1 - SSIM)
        # A photo's channel at 255 (or 0) bounds the render there instead of fixing it (model/loss.py,
        # bound_clipped): the camera clipped whatever was brighter, so the loss does not learn the clip.
        bound_clipped: bool = False
        # Opt-in surface regulariser (docs/geometry.md): + w * mean(smallest scale) / scene extent, which pulls
        # each Gaussian flat towards a surface element (2DGS's surfels, PGSR's flattening); 0 = off.
        flatten_weight: float = 0.0
        # Opt-in surface regulariser (docs/geometry.md): + w * (1 - <blended Gaussian normal, normal of the rendered
        # depth>) (model/surface_loss.py, 2DGS's term), from this share of the steps on: the depth of the first
        # steps is not a surface yet (2DGS starts at 7000 of 30000). One more 4-channel render per step; 0 = off.
        normal_consistency_weight: float = 0.0
        normal_consistency_from: float = 0.3
        # LPIPS as published tables report it (docs/usage.md, "metrics.json"): "lpips" with AlexNet (gsplat's
        # simple_trainer, splatfacto, nerfbaselines) and "lpips_vgg" with VGG (the 3DGS paper's backbone,
        # nerfbaselines' Blender protocol), both on images scaled to [-1, 1]; "alex" or "vgg" computes one.
        lpips_net: Literal["both", "alex", "vgg"] = "both"
        # A 3DGS PLY of frozen Gaussians rendered with the model's own but never optimised, densified or exported
        # (model/context.py): a partition block's view of the rest of the scene (train_blocks.py --context).
        context: str = ""
        # A 3DGS PLY whose Gaussians the model starts from, in place of the data set's points (which are then
        # neither read nor seeded): a partition block fine-tuning its region of the coarse model.
        init_ply: str = ""

        def __post_init__(self) -> None:
            # Runs when the config is loaded (before any data is read), not hours into training.
            check_model_config(self)

    def __init__(self, config: Config | None = None, dataset: Any = None) -> None:
        super().__init__()
        self.config = config if config is not None else self.Config()
        self.scene_extent = float(getattr(dataset, "scene_extent", 1.0) or 1.0)
        self.step = 0  # last step given to update_learning_rate(); drives the SH degree schedule
        self.metric_notes: dict[str, str] = {}
        self._optimizer: torch.optim.Optimizer | None = None
        self._max_steps = 1
        self._means_lr_hold = 0  # steps before the means lr starts decaying (hold_means_lr)
        self._lpips: dict[str, Any] = {}  # backbone -> metrics.LPIPS, built on the first evaluation
        if self.config.init_ply:
            from .context import load_start

            init = load_start(self.config.init_ply, self.config.sh_degree)
        else:
            init = self._initial_params(getattr(dataset, "point_cloud", None))
        # A list keeps gsplat's order (ParameterDict sorts the keys of a plain dict).
        self.params = nn.ParameterDict([(k, nn.Parameter(init[k])) for k in PARAM_NAMES])
        self._has_context = bool(self.config.context)
        if self._has_context:
            from .context import load_context

            for key, value in load_context(self.config.context, self.config.sh_degree).items():
                self.register_buffer(f"context_{key}", value, persistent=False)  # moves with .to(), not saved

    def _initial_params(self, point_cloud: Any) -> dict[str, Tensor]:
        from ..data.pointcloud import init_gaussians, random_cube

        cfg = self.config
        if point_cloud is None:
            point_cloud = random_cube(
                cfg.init_num_points, side=2.0 * cfg.init_extent * self.scene_extent, seed=cfg.seed
            )
        return init_gaussians(
            point_cloud.xyz,
            point_cloud.rgb,
            cfg.sh_degree,
            init_opacity=cfg.init_opacity,
            init_scale=cfg.init_scale,
            random_quats=cfg.init_random_quats,
            seed=cfg.seed,
            oriented=cfg.init_oriented,
        )

    # ---------------------------------------------------------------- parameters and activation
    @property
    def num_gaussians(self) -> int:
        return int(self.params["means"].shape[0])

    @property
    def device(self) -> torch.device:
        return self.params["means"].device

    def active_sh_degree(self, step: int | None = None) -> int:
        """SH degree in use at ``step`` (default: the last scheduled step), as gsplat:
        ``min(step // sh_degree_interval, sh_degree)``."""
        step = self.step if step is None else step
        return min(step // max(self.config.sh_degree_interval, 1), self.config.sh_degree)

    def updates_sh_rest(self, step: int | None = None) -> bool:
        """Whether ``shN`` is trained at ``step`` (default: the last scheduled step)."""
        step = self.step if step is None else step
        return step % self.config.sh_rest_update_every == 0

    def render_params(self, sh_degree: int | None = None) -> dict[str, Any]:
        """Activated parameters for ``rasterization``.

        Returns:
            ``means [N,3]``, ``quats [N,4]`` (unnormalised), ``scales [N,3]`` (exp), ``opacities [N]``
            (sigmoid), ``colors [N,K,3]`` (SH coefficients), ``sh_degree`` (active degree, or the
            ``sh_degree`` argument when given).
        """
        p = self.params
        return {
            **activated(p, p["shN"] if self.updates_sh_rest() else p["shN"].detach()),
            "sh_degree": self.active_sh_degree() if sh_degree is None else sh_degree,
        }

    def context_params(self) -> dict[str, Tensor] | None:
        """The frozen context Gaussians (``model.context``), activated as in :meth:`render_params` (``means
        [M,3]``, ``quats [M,4]``, ``scales [M,3]``, ``opacities [M]``, ``colors [M,K,3]``), or None without any."""
        if not self._has_context:
            return None
        from .context import CONTEXT_KEYS

        return {key: getattr(self, f"context_{key}") for key in CONTEXT_KEYS}

    # ---------------------------------------------------------------- loss and metrics
    def _targets(self, render_out: Mapping[str, Any], batch: list, stored: bool = False) -> tuple[Tensor, Tensor]:
        """``(rgb, gt)``: the renders (in each photo's colours) and the photos, float in [0, 1], or
        with ``stored`` the uint8 photos as the views keep them (value * 255: the loss reads those
        directly) when every view holds one; downscaled views hold float block means (0..255,
        ``data/resample.py``), which go through ``View.float_image`` like any other."""
        rgb = render_out["rgb"]
        if any(view.color_transform is not None for view in batch):  # the photo's colours, not the canonical ones
            rgb = torch.stack([c if v.color_transform is None else v.color_transform(c) for v, c in zip(batch, rgb)])
        if stored and all(view.image.dtype == torch.uint8 for view in batch):
            gt = torch.stack([view.image_on(rgb.device) for view in batch])
        else:
            gt = torch.stack([view.float_image(rgb.device) for view in batch])
        if gt.shape != rgb.shape:
            raise ValueError(f"rendered images {tuple(rgb.shape)} and batch images {tuple(gt.shape)} differ")
        return rgb, gt

    def get_loss_dict(self, render_out: Mapping[str, Any], batch: list) -> dict[str, Tensor]:
        """3DGS photometric loss ``(1 - l) * L1 + l * (1 - SSIM)``.

        SSIM here uses INRIA's zero-padded "same" window so border pixels get gradients. Pixels a
        view's mask ignores add nothing to either term (``model/loss.py``).

        Args:
            render_out: Renderer output with ``rgb [C,H,W,3]``.
            batch: The ``C`` views rendered.

        Returns:
            ``loss`` (to minimise), ``l1`` and ``ssim`` (detached, for logging); with ``flatten_weight``
            also ``flatten``, the mean smallest scale over the scene extent; with ``normal_consistency_weight``
            (once its share of the steps has passed) ``normal``, the depth-normal consistency term.
        """
        from .loss import batch_mask, bound_clipped, masked_l1_and_ssim

        rgb, gt = self._targets(render_out, batch, stored=True)
        if self.config.bound_clipped:
            rgb = bound_clipped(rgb, gt)
        mask = batch_mask(batch, rgb.device)  # None without training masks: the plain terms
        l1, s = masked_l1_and_ssim(rgb, gt, mask)
        lam = self.config.ssim_lambda
        out = {"loss": (1.0 - lam) * l1 + lam * (1.0 - s), "l1": l1.detach(), "ssim": s.detach()}
        if self.config.flatten_weight > 0:
            # log scales: the smallest axis is the smallest log; exp of it only, not of all three
            flat = torch.exp(self.params["scales"].min(dim=-1).values).mean() / self.scene_extent
            out["loss"] = out["loss"] + self.config.flatten_weight * flat
            out["flatten"] = flat.detach()
        w = self.config.normal_consistency_weight
        if w > 0 and self.step >= self.config.normal_consistency_from * self._max_steps:
            from .surface_loss import depth_normal_consistency

            if "render_features" not in render_out:
                problem = "needs a renderer that blends per-Gaussian features (GaussianRenderer's render_features)"
                raise OptionError("normal_consistency_weight", problem, "model")
            cams = [view.camera for view in batch]
            # the raw parameters: the term reads means, rotations and which scale is smallest (log or not)
            term = depth_normal_consistency(render_out["render_features"], self.params, cams)
            out["loss"] = out["loss"] + w * term
            out["normal"] = term.detach()
        return out

    @torch.no_grad()
    def get_metric_dict(self, render_out: Mapping[str, Any], batch: list) -> dict[str, Tensor | None]:
        """PSNR, SSIM (scikit-image compatible) and LPIPS over the batch.

        ``lpips`` (AlexNet) and ``lpips_vgg`` (VGG), each ``None`` when its backbone weights aren't cached
        (or the images are too small for the backbone); ``metric_notes`` then says why under that key. A number computed without
        the real weights would mislead.
        """
        from ..metrics import LPIPS, psnr, ssim

        rgb, gt = self._targets(render_out, batch)
        rgb = rgb.clamp(0.0, 1.0)
        out = {"psnr": psnr(rgb, gt), "ssim": ssim(rgb, gt, padding="valid")}
        for key, net in LPIPS_KEYS[self.config.lpips_net]:
            if net not in self._lpips:
                self._lpips[net] = LPIPS(net)
            out[key] = self._lpips[net](rgb, gt)
            if out[key] is None:
                self.metric_notes[key] = self._lpips[net].last_reason
        return out

    # ---------------------------------------------------------------- optimizer and schedule
    def create_optimizer(self, max_steps: int, batch_size: int = 1) -> torch.optim.Adam:
        """Adam with one group per parameter (``group["name"]``), lrs from ``cfg.lr``.

        Args:
            max_steps: Step at which the means lr reaches ``means_lr_final_factor`` of its start.
            batch_size: Images per step over all processes (sqrt lr scaling, see ``build_adam``).
        """
        lrs = {name: getattr(self.config.lr, name) for name in PARAM_NAMES}
        lrs["means"] *= self.scene_extent
        self._optimizer = build_adam(self.params, lrs, batch_size)
        self._max_steps = max(int(max_steps), 1)
        return self._optimizer

    def hold_means_lr(self, until_step: int) -> None:
        """Keep the means lr at its start value before ``until_step``, then decay it over the rest.

        DashGaussian's schedule for coarse-to-fine training: positions keep a large step size while
        the views are downscaled, and the decay to ``means_lr_final_factor`` spans the steps from
        ``until_step`` to ``max_steps``. Set by ``ResolutionScheduleHook(hold_means_lr=True)`` in
        ``before_train``; 0 (the default) is the plain exponential schedule.
        """
        self._means_lr_hold = max(int(until_step), 0)

    def update_learning_rate(self, step: int) -> None:
        """Set the means lr for ``step`` and remember the step (for the SH degree schedule)."""
        self.step = int(step)
        if self._optimizer is None:
            return
        hold = min(self._means_lr_hold, self._max_steps - 1)
        for group in self._optimizer.param_groups:
            if group.get("name") == "means":
                group["lr"] = exponential_lr(
                    group["base_lr"], step - hold, self._max_steps - hold, self.config.means_lr_final_factor
                )

    # ---------------------------------------------------------------- state
    def get_extra_state(self) -> dict[str, Any]:
        return {"step": self.step, "scene_extent": self.scene_extent, "sh_degree": self.config.sh_degree}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.step = int(state.get("step", 0))
        self.scene_extent = float(state.get("scene_extent", self.scene_extent))

    def load_params(self, params: Mapping[str, Tensor], source: str = "checkpoint") -> None:
        """Replace all Gaussians by ``params`` (any N, same SH degree).

        Raises:
            CheckpointError: a parameter is missing, N differs between parameters, or the SH
                degree differs from ``cfg.sh_degree``.
        """
        missing = [k for k in PARAM_NAMES if k not in params]
        if missing:
            raise CheckpointError(f"{source}: missing Gaussian parameter(s) {', '.join(missing)}")
        n = params["means"].shape[0]
        if any(params[k].shape[0] != n for k in PARAM_NAMES):
            shapes = ", ".join(f"{k} {tuple(params[k].shape)}" for k in PARAM_NAMES)
            raise CheckpointError(f"{source}: Gaussian parameters disagree on N ({shapes})")
        k_rest = params["shN"].shape[1] if params["shN"].dim() == 3 else -1
        degree = math.isqrt(k_rest + 1) - 1 if k_rest >= 0 else -1
        if k_rest + 1 != num_sh_bases(self.config.sh_degree):
            found = (
                f"sh_degree {degree}"
                if num_sh_bases(max(degree, 0)) == k_rest + 1
                else f"shN shape {tuple(params['shN'].shape)}"
            )
            raise CheckpointError(f"{source}: has {found} but the model config has sh_degree {self.config.sh_degree}")
        device, dtype = self.device, self.params["means"].dtype
        for name in PARAM_NAMES:
            self.params[name] = nn.Parameter(params[name].detach().to(device=device, dtype=dtype).clone())
        self._rebind_optimizer()

    def _rebind_optimizer(self) -> None:
        # The old optimizer would keep stepping the replaced tensors; point its groups at the new
        # parameters with fresh moments (a checkpointed optimizer state is loaded afterwards).
        if self._optimizer is None:
            return
        for group in self._optimizer.param_groups:
            for p in group["params"]:
                self._optimizer.state.pop(p, None)
            group["params"] = [self.params[group["name"]]]

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False):
        """Like ``nn.Module.load_state_dict`` but accepts any number of Gaussians.

        Raises:
            CheckpointError: missing parameters or a different SH degree.
        """
        prefix = "params."
        params = {k[len(prefix) :]: v for k, v in state_dict.items() if k.startswith(prefix)}
        self.load_params(params)
        rest = {k: v for k, v in state_dict.items() if not k.startswith(prefix)}
        rest.update({prefix + k: v for k, v in self.params.state_dict().items()})
        try:
            return super().load_state_dict(rest, strict=strict, assign=assign)
        except RuntimeError as exc:
            raise CheckpointError(f"model state does not match GaussianModel: {exc}") from None

    @classmethod
    def from_ply(cls, path: str | Path, cfg: Config | None = None) -> GaussianModel:
        """A model holding the Gaussians of a 3DGS PLY file (SH degree taken from the file).

        The model's step is set so the full SH degree is active: a PLY holds a trained model.
        """
        from dataclasses import replace

        from ..io.ply import load_ply

        params = load_ply(path)
        degree = math.isqrt(params["shN"].shape[1] + 1) - 1
        cfg = replace(cfg or cls.Config(), sh_degree=degree, init_num_points=1)
        model = cls(cfg)
        model.load_params(params, source=str(path))
        model.step = degree * cfg.sh_degree_interval
        return model
