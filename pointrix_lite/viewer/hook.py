"""ViewerHook: watch the model in the browser while it trains (``hooks: [{type: ViewerHook}]``
or ``train.py --viewer``).

Training and viewer renders take turns through a :class:`RenderGate` (never at once; renders
capped at ``time_share`` of wall time). The hook reads the model only under the gate and never
touches RNGs or parameters, so a run with the hook and no browser connected trains exactly like
one without it. After the run the viewer keeps serving the final model until Ctrl-C
(``keep_serving: false`` to exit at once).
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from ..config import OptionError
from ..errors import ConfigError
from ..hook import Hook, Priority
from ..registry import HOOKS


@HOOKS.register()
class ViewerHook(Hook):
    """Serves a viser viewer of ``trainer.model`` from ``before_train`` on (main process only).

    VERY_LOW priority: its ``before_train_iter`` runs last, right before the step it guards, and
    its ``after_train_iter`` (release, then wait while paused) after the other hooks have read the
    step's results.
    """

    priority = Priority.VERY_LOW

    @dataclass
    class Config:
        host: str = "127.0.0.1"  # 0.0.0.0 lets anyone on the network view the scene
        port: int = 8080  # 0: a free port chosen by the OS (printed)
        max_res: int = 512  # longest image side once the camera stops
        preview_res: int = 256  # longest side while the camera moves
        time_share: float = 0.1  # largest fraction of wall time the viewer may take from training
        jpeg_quality: int = 85
        keep_serving: bool = True  # after the run, serve the final model until Ctrl-C
        gui_every_s: float = 0.5  # how often the step / loss / Gaussian count panel updates

        def __post_init__(self) -> None:
            home = "hooks.ViewerHook"
            if not 0.0 < self.time_share <= 1.0:
                raise OptionError("time_share", f"must be in (0, 1], got {self.time_share}", home)
            if self.max_res < 16 or self.preview_res < 16:
                raise OptionError(
                    "max_res / preview_res", f"must be >= 16, got {self.max_res} / {self.preview_res}", home
                )
            if not 1 <= self.jpeg_quality <= 100:
                raise OptionError("jpeg_quality", f"must be in 1..100, got {self.jpeg_quality}", home)
            if not 0 <= self.port <= 65535:
                raise OptionError("port", f"must be in 0..65535 (0: any free port), got {self.port}", home)

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        from .gate import RenderGate

        self.gate = RenderGate(config.time_share)
        self.viewer: Any = None
        self._last_gui = 0.0
        self._in_step = False
        self._stop_serving = threading.Event()

    def before_train(self) -> None:
        if not getattr(self.trainer, "is_main_process", True) or self.viewer is not None:
            return
        from .camera import initial_view_from_cameras, initial_view_from_points
        from .scene import DisplayOptions, SceneView
        from .server import Viewer

        trainer, cfg = self.trainer, self.config
        dataset = trainer.dataset
        cameras = [v.camera for v in getattr(dataset, "train_views", [])]
        model = trainer.model
        view = initial_view_from_cameras(cameras) if cameras else initial_view_from_points(model.params["means"])
        self.viewer = Viewer(
            SceneView(model, trainer.renderer, dataset.background),
            cfg.host,
            cfg.port,
            options=DisplayOptions(max_res=cfg.max_res, preview_res=cfg.preview_res, jpeg_quality=cfg.jpeg_quality),
            initial_view=view,
            gate=self.gate,
            on_pause=self.gate.set_paused,
            where="hooks.ViewerHook.host/port",
        )
        self.gate.training = True

    def before_train_iter(self, batch_idx: int, batch: list) -> None:
        if self.viewer is not None:
            self.gate.begin_training_step()
            self._in_step = True

    def after_train_iter(self, batch_idx: int, batch: list) -> None:
        if self.viewer is None:
            return
        self._release()
        now = time.perf_counter()
        if now - self._last_gui >= self.config.gui_every_s:
            self._last_gui = now
            trainer = self.trainer
            loss = trainer.loss_dict.get("loss")
            self.viewer.show_training(
                trainer.global_step,
                getattr(trainer.model, "num_gaussians", None),
                float(loss) if loss is not None else None,
            )
        if self.gate.paused:
            print(
                f"viewer: training paused at step {self.trainer.global_step} (Resume in the browser)", file=sys.stderr
            )
            self.gate.wait_while_paused(
                lambda: bool(getattr(getattr(self.trainer, "state", None), "stop_requested", False))
            )

    def _release(self) -> None:
        if self._in_step:
            self._in_step = False
            self.gate.end_training_step()

    def after_train(self) -> None:
        if self.viewer is None:
            return
        self._release()  # a step that raised never reached after_train_iter
        self.gate.training = False
        trainer = self.trainer
        loss = trainer.loss_dict.get("loss")
        self.viewer.show_training(
            trainer.global_step,
            getattr(trainer.model, "num_gaussians", None),
            float(loss) if loss is not None else None,
        )
        self.viewer.refresh()

    def after_run(self) -> None:
        if self.viewer is None:
            return
        try:
            if self.config.keep_serving:
                print(f"viewer: training finished; still serving http://localhost:{self.viewer.port} (Ctrl-C to exit)")
                while not self._stop_serving.wait(0.5):
                    pass
        except KeyboardInterrupt:
            print("", file=sys.stderr)
        finally:
            self.close()

    def stop_serving(self) -> None:
        """End the after-training wait from another thread (what Ctrl-C does in a terminal)."""
        self._stop_serving.set()

    def close(self) -> None:
        """Stop the server and render threads (idempotent)."""
        self._release()
        if self.viewer is not None:
            self.viewer.close()
            self.viewer = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def add_viewer_hook(trainer: Any, port: int) -> ViewerHook:
    """``train.py --viewer``: register a :class:`ViewerHook` on ``port`` with default options.

    Raises:
        ConfigError: the config already lists a ViewerHook (two viewers would fight over the steps).
    """
    if any(isinstance(h, ViewerHook) for h in trainer.hooks):
        raise ConfigError("--viewer: the config already has a ViewerHook under hooks; set its port there instead")
    from .server import check_bind

    check_bind("127.0.0.1", port, "--viewer-port")  # fail before training starts, not at its first step
    hook = ViewerHook(ViewerHook.Config(port=port))
    trainer.register_hook(hook)
    return hook
