"""The whole run, stage by stage, with a live status line per stage (nerfstudio process_data style)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from ..io.undistort import undistort
from . import sfm
from .colmap_import import import_pycolmap
from .colmap_log import LOG_NAME, HierarchicalReader, follow
from .downscale import write_downscaled
from .inputs import ImageSet, scan_images
from .mapping import map_scene
from .matching import match_features
from .options import CLUSTER_OVERLAP, ProcessOptions
from .principal_point import MAX_SHIFT, MIN_IMAGES, refine_principal_point
from .report import Summary, print_summary, write_summary
from .sfm import ChosenModel
from .upright import write_upright

STAGE_FILE = "stage.txt"  # the stage running now: the parent names it if pycolmap aborts the worker


class Stages:
    """Times each stage, shows a spinner with live text, prints one line when it is done."""

    def __init__(self, console: Console, colmap_dir: Path) -> None:
        self.console, self.colmap_dir, self.seconds = console, colmap_dir, {}
        self._status = None

    @contextlib.contextmanager
    def stage(self, name: str, text: str) -> Iterator[Stages]:
        (self.colmap_dir / STAGE_FILE).write_text(name + "\n")
        start = time.perf_counter()
        with self.console.status(f"[bold]{name}[/bold]: {text}") as status:
            self._status, self._name = status, name
            yield self
        self._status = None
        self.seconds[name] = round(time.perf_counter() - start, 2)

    def update(self, text: str) -> None:
        if self._status is not None:
            self._status.update(f"[bold]{self._name}[/bold]: {text}")

    def done(self, text: str) -> None:
        self.console.print(f"[green]✓[/green] [bold]{self._name}[/bold]: {text}", highlight=False)


def prepare_output(opts: ProcessOptions) -> Path:
    """Create ``out/colmap``; what :func:`outputs_in_the_way` reported must have been cleared."""
    colmap_dir = opts.out / "colmap"
    colmap_dir.mkdir(parents=True, exist_ok=True)
    return colmap_dir


def outputs_in_the_way(out: Path) -> list[Path]:
    """What this run would write that already exists under ``out``."""
    if not out.exists():
        return []
    names = ("images", "sparse", "colmap", "masks")  # masks: stale ones would not match new images
    return sorted(p for p in out.iterdir() if p.name in names or p.name.startswith("images_"))


def run(opts: ProcessOptions, console: Console) -> Summary:
    """Run every stage; returns the summary (also printed and written to ``colmap/summary.json``)."""
    colmap_dir = prepare_output(opts)
    stages = Stages(console, colmap_dir)
    pycolmap = import_pycolmap()
    if opts.video is not None:
        from .video import select_frames

        frames_dir = colmap_dir / "frames"
        how = "sharpest" if opts.sharp_frames else "middle"
        with stages.stage("frames", f"reading {opts.video.name}") as st:
            names = select_frames(
                opts.video,
                frames_dir,
                opts.num_frames,
                opts.sharp_frames,
                on_frame=lambda i, n: st.update(f"frame {i}/{n}") if i % 10 == 0 or i == n else None,
            )
            st.done(f"{len(names)} frames ({how} of each window) -> {frames_dir}")
        images = scan_images(frames_dir)
    else:
        images = scan_images(opts.images)
    summary = Summary(out=str(opts.out), n_input=len(images.names), skipped_inputs=images.skipped)
    if images.turned:
        summary.turned_upright = len(images.turned)
        images = _upright(images, colmap_dir / "upright", opts.threads, stages)
    _structure_from_motion(pycolmap, opts, images, colmap_dir, stages, summary)
    if opts.downscales > 0:
        with stages.stage("downscale", f"{opts.downscales} level(s)") as st:
            folders = write_downscaled(opts.out, opts.downscales)
            summary.downscaled = [f.name for f in folders]
            st.done(", ".join(summary.downscaled))
    summary.stage_seconds = dict(stages.seconds)
    (colmap_dir / STAGE_FILE).unlink(missing_ok=True)
    write_summary(colmap_dir / "summary.json", summary)
    print_summary(console, summary)
    return summary


def _upright(images: ImageSet, dst: Path, threads: int, stages: Stages) -> ImageSet:
    """The photos as shown (EXIF orientation applied) in ``dst``: what SfM and undistortion read from now on."""
    n, k = len(images.names), len(images.turned)
    with stages.stage("upright", f"0/{n} photos") as st:
        write_upright(images.root, images.names, images.turned, dst, threads, lambda d, t: st.update(f"{d}/{t} photos"))
        st.done(f"{k} of {n} photos turned as their EXIF orientation shows them -> {dst}")
    return replace(images, root=dst, turned={})


def _structure_from_motion(
    pycolmap, opts: ProcessOptions, images: ImageSet, colmap_dir: Path, stages: Stages, summary: Summary
) -> None:
    database = colmap_dir / "database.db"
    database.unlink(missing_ok=True)  # a stale database would add its images to this run
    n = len(images.names)
    if images.skipped:
        console = stages.console
        console.print(
            f"[yellow]skipping {len(images.skipped)} unreadable file(s)[/yellow]: "
            + ", ".join(f"{name} ({why})" for name, why in images.skipped[:5]),
            highlight=False,
        )
    colmap_masks = None
    if opts.masks is not None:
        from .masks import write_colmap_masks

        colmap_masks = write_colmap_masks(opts.masks, images.names, colmap_dir / "masks")
    with stages.stage("features", f"0/{n} images") as st:
        keypoints = sfm.extract_features(
            pycolmap, database, images.root, images.names, opts, lambda d, t: st.update(f"{d}/{t} images"), colmap_masks
        )
        sizes = len(sfm.by_size(images.root, images.names))
        cameras = "one shared camera" if sizes == 1 else f"{sizes} cameras, one per image size"
        st.done(f"{n} images, {keypoints} keypoints ({opts.camera_model}, {cameras})")
    matcher, log = opts.resolved_matcher(n), colmap_dir / LOG_NAME
    with stages.stage("matching", f"{matcher}") as st:
        matched, verified = match_features(
            pycolmap, database, matcher, opts, lambda text: st.update(f"{matcher}: {text}"), log
        )
        st.done(f"{matcher}: {matched} pairs matched, {verified} verified")
    summary.matcher, summary.mapper = matcher, opts.resolved_mapper(n)
    chosen = _map(pycolmap, opts, database, images, colmap_dir, stages)
    rec = chosen.reconstruction
    if opts.principal_point == "refine":
        summary.principal_points = _principal_point(
            pycolmap, rec, colmap_dir / "sparse" / str(chosen.index), opts, stages
        )
    summary.focal_lengths = sfm.check_intrinsics(rec, opts.camera_model)
    summary.registered, summary.unregistered, summary.dropped_models = (
        chosen.registered,
        chosen.unregistered,
        chosen.dropped,
    )
    summary.reprojection_error = float(rec.compute_mean_reprojection_error())
    summary.num_points = int(rec.num_points3D())
    with stages.stage("undistort", "to PINHOLE") as st:
        undistort(pycolmap, colmap_dir / "sparse" / str(chosen.index), images.root, opts.out, opts.threads)
        st.done(f"{opts.out / 'images'}, {opts.out / 'sparse' / '0'}")
    if opts.masks is not None:
        from .masks import undistort_masks

        with stages.stage("masks", "undistorting") as st:
            written = undistort_masks(
                pycolmap,
                colmap_dir / "sparse" / str(chosen.index),
                opts.out / "sparse" / "0",
                opts.masks,
                opts.out / "masks",
            )
            st.done(f"{len(written)} masks -> {opts.out / 'masks'}")
    # What training reads: the undistorted cameras (undistortion changes the image size).
    sizes = [
        (int(c.width), int(c.height)) for c in pycolmap.Reconstruction(str(opts.out / "sparse" / "0")).cameras.values()
    ]
    summary.image_size = list(max(sizes, key=lambda wh: wh[0] * wh[1])) if sizes else []


def _principal_point(pycolmap, rec, sparse_dir: Path, opts: ProcessOptions, stages: Stages) -> list[list[float]]:
    """The principal-point stage: ``rec`` adjusted with its points free and written back to ``sparse_dir``
    (what undistortion reads); each camera's ``[cx, cy]`` as kept."""
    with stages.stage("principal point", "bundle adjustment with the principal point free") as st:
        shifts = refine_principal_point(pycolmap, rec, opts.threads)
        if not shifts:
            st.done(f"held at the centre (fewer than {MIN_IMAGES} images, or a lens model without one)")
            return []
        rec.write(str(sparse_dir))
        st.done(
            "; ".join(
                f"camera {s.camera_id}: ({s.before[0]:.1f}, {s.before[1]:.1f}) -> ({s.after[0]:.1f}, {s.after[1]:.1f}) px"
                + ("" if s.kept else f", beyond {MAX_SHIFT:.0%} of the image: held at the centre")
                for s in shifts
            )
        )
        return [list(s.after if s.kept else s.before) for s in shifts]


def _map(
    pycolmap, opts: ProcessOptions, database: Path, images: ImageSet, colmap_dir: Path, stages: Stages
) -> ChosenModel:
    """The mapping stage with its status line: registered images (incremental) or clusters (hierarchical)."""
    n, mapper = len(images.names), opts.resolved_mapper(len(images.names))
    registered = [2]  # the incremental mapper's callback fires for each image after the initial pair

    def on_image() -> None:
        registered[0] += 1
        stages.update(f"{mapper}: {registered[0]}/{n} images registered (over all models so far)")

    clusters = (
        f", clusters of {opts.cluster_images} + {CLUSTER_OVERLAP} shared images" if mapper == "hierarchical" else ""
    )
    with stages.stage("mapping", f"{mapper}{clusters}") as st:
        watch = contextlib.nullcontext()
        if mapper == "hierarchical":  # no callback: its progress is in COLMAP's log
            watch = follow(colmap_dir / LOG_NAME, HierarchicalReader(), lambda text: st.update(f"{mapper}: {text}"))
        with watch:
            recs = map_scene(pycolmap, database, images.root, colmap_dir / "sparse", opts, on_image, mapper)
        chosen = sfm.pick_model(recs, images.names, opts.min_registered)
        st.done(f"{mapper}: {len(chosen.registered)}/{n} images in model {chosen.index}")
    return chosen
