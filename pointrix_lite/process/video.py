"""Video -> still frames: N evenly spaced windows, one frame per window (optionally the sharpest)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..errors import DataError


def sharpness(rgb: np.ndarray) -> float:
    """Variance of the 4-neighbour Laplacian of the grey image ``rgb [H, W, 3] uint8`` (blur -> low)."""
    g = rgb.astype(np.float32) @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    lap = g[1:-1, :-2] + g[1:-1, 2:] + g[:-2, 1:-1] + g[2:, 1:-1] - 4.0 * g[1:-1, 1:-1]
    return float(lap.var())


def select_frames(
    video: Path, out_dir: Path, num_frames: int, sharp: bool, on_frame: Callable[[int, int], None] | None = None
) -> list[str]:
    """Write one PNG per window of ``video`` into ``out_dir``; return the file names.

    The video's frames are split into ``num_frames`` equal windows (fewer if the video is shorter);
    each window contributes its middle frame, or with ``sharp`` its sharpest one (variance of the
    Laplacian), which drops motion-blurred frames. ``on_frame(i, total)`` reports progress.

    Raises:
        DataError: missing/unreadable video, or one without frames.
        ConfigError: imageio-ffmpeg is not installed.
    """
    from ..io.ffmpeg import import_ffmpeg
    from ..io.images import write_png

    imageio_ffmpeg = import_ffmpeg("--video")

    if not video.is_file():
        raise DataError(f"--video {video}: file not found")
    try:
        total, _ = imageio_ffmpeg.count_frames_and_secs(str(video))
    except (RuntimeError, OSError, ValueError) as exc:
        raise DataError(f"--video {video}: ffmpeg cannot read it ({' '.join(str(exc).split())[:160]})") from None
    if total < 1:
        raise DataError(f"--video {video}: the video has no frames")
    n = max(1, min(num_frames, total))
    window = lambda i: min(n - 1, i * n // total)  # noqa: E731 - frame index -> window
    # Window w holds frames ceil(w total / n) .. ceil((w + 1) total / n) - 1, exactly those window() maps to it
    # (rounding the bounds down instead left most windows without their middle frame when n does not divide total).
    start = [-(-w * total // n) for w in range(n + 1)]
    middle = {w: (start[w] + start[w + 1] - 1) // 2 for w in range(n)}
    best: dict[int, tuple[float, np.ndarray]] = {}
    try:
        reader = imageio_ffmpeg.read_frames(str(video))
        meta = next(reader)
        w, h = meta["size"]
        for i, raw in enumerate(reader):
            if i >= total:
                break
            k = window(i)
            if sharp or i == middle[k]:
                frame = np.frombuffer(raw, dtype=np.uint8).reshape(h, w, 3)
                score = sharpness(frame) if sharp else 0.0
                if k not in best or score > best[k][0]:
                    best[k] = (score, frame.copy())
            if on_frame is not None:
                on_frame(i + 1, total)
    except (RuntimeError, OSError, StopIteration) as exc:
        raise DataError(f"--video {video}: ffmpeg failed while decoding ({' '.join(str(exc).split())[:160]})") from None
    if not best:
        raise DataError(f"--video {video}: the video has no frames")
    out_dir.mkdir(parents=True, exist_ok=True)
    names = []
    for k in sorted(best):
        name = f"frame_{k:05d}.png"
        write_png(out_dir / name, best[k][1])
        names.append(name)
    return names
