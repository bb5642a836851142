"""PlyExportHook: write the trained Gaussians as a viewer-compatible PLY (and web formats) when training ends."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..config import OptionError, check_relative_path
from ..hook import Hook, Priority
from ..progress import phase
from ..registry import HOOKS

HOME = "hooks.PlyExportHook"  # where a config built in Python says its errors are


@HOOKS.register()
class PlyExportHook(Hook):
    """Saves ``trainer.model`` to ``<exp_dir>/<filename>`` in INRIA 3DGS's PLY layout (``io/ply.py``).

    ``formats`` adds web-viewer formats (``export/formats.py``) beside it, named from ``filename``'s
    stem: ``[ply, splat, ply_compressed]`` writes ``point_cloud.ply``, ``point_cloud.splat`` and
    ``point_cloud.compressed.ply``; ``spz``, ``sog`` and ``glb`` add ``point_cloud.spz`` /
    ``.sog`` / ``.glb`` (SPZ in its default frame, PLY's).

    Like MMEngine's task-specific hooks it is not a default hook: a config lists it under
    ``hooks:`` (``configs/demo*.yaml`` do). A model without Gaussian ``params`` (a custom model)
    is skipped with one printed line instead of failing a finished run.

    Runs in ``after_train`` (before the test split is rendered, so a crash in testing still
    leaves the PLY) at LOW priority: after LogHook has closed the progress bar, before
    CheckPointHook's final save. ``every`` > 0 also writes ``point_cloud_step_XXXXXX.ply``
    snapshots during training.
    """

    priority = Priority.LOW

    @dataclass
    class Config:
        filename: str = "point_cloud.ply"  # relative to exp_dir
        every: int = 0  # also write a step-numbered snapshot every N steps (0: only at the end)
        formats: list[str] = field(default_factory=lambda: ["ply"])  # ply, splat, ply_compressed, spz, sog, glb

        def __post_init__(self) -> None:
            from .formats import FORMATS  # plain Python; the encoders load when used

            if self.every < 0:
                raise OptionError("every", f"must be >= 0, got {self.every}", HOME)
            check_relative_path("filename", self.filename, HOME)
            if not self.formats:
                raise OptionError("formats", "name at least one format", HOME)
            for name in self.formats:
                if name not in FORMATS:
                    raise OptionError("formats", f"unknown export format {name!r} (known: {', '.join(FORMATS)})", HOME)

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        from .formats import get_format  # plain Python; the encoders load when used

        self.formats = [get_format(name, f"{HOME}.formats") for name in dict.fromkeys(config.formats)]
        self.path: Path | None = None  # the last file written in the first format
        self.paths: list[Path] = []  # every file of the last export

    def _export(self, path: Path) -> Path | None:
        """Write every format; ``path`` is the ``ply`` file name, the others swap its ``.ply`` suffix."""
        from ..errors import DataError
        from ..io.ply import save_ply
        from .exporter import export_gaussians  # plyfile / gsplat only when a run actually exports

        if not getattr(self.trainer, "is_main_process", True):
            return None  # under torchrun every rank holds the same model; rank 0 writes it
        model = self.trainer.model
        if not hasattr(model, "params"):
            self.trainer.console.print(
                f"PlyExportHook: {type(model).__name__} has no Gaussian params; no PLY written", markup=False
            )
            return None
        stem = path.name[: -len(path.suffix)] if path.suffix else path.name
        self.paths = []

        def say(line: str) -> None:
            self.trainer.console.print(f"PlyExportHook: {line}", markup=False)

        with phase("export", total=len(self.formats), unit="files") as advance:
            for fmt in self.formats:
                if fmt.name == "ply":  # every Gaussian as trained, exactly (what load_ply / resume-from-PLY read)
                    self.paths.append(save_ply(model, path))
                    if len(model.params["means"]) == 0:  # still written: it is the model as trained
                        say(f"{path}: the model holds no Gaussians (every one pruned?); the PLY is empty")
                else:
                    try:
                        report = export_gaussians(model.params, fmt, path.with_name(stem + fmt.suffix))
                    except DataError as exc:  # e.g. every Gaussian pruned: a finished run must not fail here
                        say(str(exc))
                    else:
                        self.paths.append(report.path)
                        for note in report.notes:  # e.g. SPZ precision lost to a stray far centre
                            if note.degraded:
                                say(f"{report.path.name}: {note.text}")
                advance()
        self.path = self.paths[0] if self.paths else None
        return self.path

    def after_train_iter(self, batch_idx: int, batch: list) -> None:
        step = self.trainer.global_step
        if self.config.every > 0 and step % self.config.every == 0:
            stem = Path(self.config.filename)
            self._export(Path(self.trainer.exp_dir) / stem.with_name(f"{stem.stem}_step_{step:06d}{stem.suffix}"))

    def after_train(self) -> None:
        self._export(Path(self.trainer.exp_dir) / self.config.filename)
