"""The nerfbaselines method against train.py: one recipe, one scene, both tools' test PSNR/SSIM side by side.

    pip install -e '.[nerfbaselines]'          # its own environment: nerfbaselines 1.2 pins numpy < 2
    python -m benchmarks nerfbaselines_method  # with that environment's python, from the repository root
    python -m benchmarks nerfbaselines_method --config configs/demo_colmap.yaml --data data/demo/colmap

Trains ``--config`` on ``--data`` with ``scripts/train.py`` (seeds 0 and 1, their ``metrics.json``) and with
``nerfbaselines train --method pointrix-lite --backend python`` (nerfbaselines' data loading, split and step
loop); renders the test split from nerfbaselines' checkpoint with ``nerfbaselines render`` (the method loaded
from its saved folder) and scores it with nerfbaselines' own ``evaluate`` (8-bit PNGs, its SSIM); then scores
that same model with ``render.py`` as train.py scores its own. Both tools hold out the COLMAP scene's every
8th image by name.

One model scored by both tools differs by nerfbaselines' conversion of the renders to 8 bits, which truncates
(a render's values drop by half a level on average) where ``metrics.json`` scores the float render. Training through
nerfbaselines reads the same images, points and split, but the poses nerfbaselines keeps in 32-bit floats
differ from COLMAP's in their last bits, so the two trainings differ as two seeds of one do, which the two
train.py seeds show. LPIPS needs the AlexNet weights in torch's hub cache; without them it is reported as
unavailable, not computed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks._common import REPO, cpu_name, load_average, parser, timed


def nerfbaselines_cli() -> Path:
    """The ``nerfbaselines`` command of this interpreter's environment."""
    cli = Path(sys.executable).with_name("nerfbaselines")
    if not cli.exists():
        raise SystemExit(
            f"error: no nerfbaselines beside {sys.executable}; run with an environment made by "
            "pip install -e '.[nerfbaselines]'"
        )
    return cli


def ours(config: str, out: Path, seed: int) -> dict:
    """train.py's run of ``config`` (with ``seed``) into ``out``: its metrics.json."""
    name = f"train_py_seed{seed}"
    run = ["scripts/train.py", "--config", config, f"output_dir={out}", f"name={name}", f"seed={seed}", "--overwrite"]
    subprocess.run([sys.executable, *run], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    return json.loads((out / name / "metrics.json").read_text())


def scored_here(checkpoint: Path, data: str, out: Path) -> dict:
    """The model of nerfbaselines' ``checkpoint`` folder scored by ``render.py`` on ``data``'s test split, as
    train.py scores its own (metrics.json): an experiment folder made of the saved config and checkpoint."""
    import yaml

    cfg = yaml.safe_load((checkpoint / "config.yaml").read_text())
    cfg["dataset"] = {**cfg["dataset"], "data_path": str(Path(data).resolve()), "eval": True}
    cfg["exp_dir"] = str(out)
    shutil.rmtree(out, ignore_errors=True)
    (out / "checkpoints").mkdir(parents=True)
    (out / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    shutil.copy2(checkpoint / "checkpoint.pt", out / "checkpoints" / "model.pt")
    render = ["scripts/render.py", "--exp-dir", str(out), "--checkpoint", str(out / "checkpoints" / "model.pt")]
    subprocess.run([sys.executable, *render], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    return json.loads((out / "metrics.json").read_text())


def theirs(config: str, data: str, out: Path) -> tuple[dict, float, Path]:
    """nerfbaselines' training (evaluation off: it is done below), render and evaluation; its results.json,
    its training seconds and its checkpoint folder."""
    cli = str(nerfbaselines_cli())
    shutil.rmtree(out, ignore_errors=True)
    base = ["--method", "pointrix-lite", "--backend", "python", "--data", data]
    train = [cli, "train", *base, "--output", str(out), "--set", f"config={config}", "--logger", "none"]
    never = str(10**9)  # a step the run never reaches: evaluation is done below, LPIPS only where it can be
    train += ["--eval-few-iters", never, "--eval-all-iters", never, "--disable-output-artifact"]
    subprocess.run(train, cwd=REPO, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    checkpoint = max(out.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    predictions = out / "predictions"
    render = [cli, "render", "--checkpoint", str(checkpoint), "--data", data, "--output", str(predictions)]
    subprocess.run([*render, "--backend", "python"], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    info = json.loads((checkpoint / "nb-info.json").read_text())
    return evaluate(predictions, out / "results.json"), float(info.get("total_train_time", float("nan"))), checkpoint


def evaluate(predictions: Path, output: Path) -> dict:
    """nerfbaselines' ``evaluate`` of ``predictions``; LPIPS left out (NaN) when its weights are not cached."""
    from nerfbaselines import evaluation, metrics

    from pointrix_lite.metrics.backbone_download import backbone_weights_path

    if not backbone_weights_path("alex").is_file():  # offline: nerfbaselines would try to download it
        import numpy as np

        metrics.lpips = lambda a, b: np.full(len(a), np.nan)
    return evaluation.evaluate(str(predictions), str(output))


def fmt(value: float | None, digits: int) -> str:
    return "unavailable" if value is None or value != value else f"{value:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    p = parser(__name__, __doc__)
    p.add_argument("--config", default="configs/demo_colmap.yaml", help="the recipe both tools train")
    p.add_argument("--data", default="data/demo/colmap", help="a COLMAP scene folder")
    p.add_argument("--out", type=Path, default=Path("/tmp/pointrix_bench_nerfbaselines"))
    args = p.parse_args(argv)
    print(f"CPU: {cpu_name()}; load {load_average()}")
    runs = {}  # name -> (metrics mean, training seconds, wall seconds)
    for seed in (0, 1):  # two seeds: how far two trainings of one recipe differ by chance alone
        m, wall = timed(ours, args.config, args.out, seed)
        runs[f"train.py, seed {seed} (metrics.json)"] = (m["mean"], m["train_seconds"], wall)
    (nb, nb_train_s, checkpoint), wall = timed(theirs, args.config, args.data, args.out / "nerfbaselines")
    runs["nerfbaselines, seed 0 (its evaluate)"] = (nb["metrics"], nb_train_s, wall)
    here, wall = timed(scored_here, checkpoint, args.data, args.out / "nerfbaselines_model")
    runs["  the same model by render.py"] = (here["mean"], float("nan"), wall)
    print(f"{'run':<40} {'PSNR':>8} {'SSIM':>7} {'LPIPS':>11} {'train s':>8} {'wall s':>7}")
    for name, (m, train_s, wall) in runs.items():
        lpips = fmt(m.get("lpips"), 4)
        print(f"{name:<40} {m['psnr']:8.3f} {m['ssim']:7.4f} {lpips:>11} {fmt(train_s, 1):>8} {wall:7.1f}")
    (a, *_), (b, *_), (c, *_), (d, *_) = runs.values()
    print(
        f"{args.config} on {args.data}: one model, nerfbaselines' evaluation - render.py's: "
        f"PSNR {c['psnr'] - d['psnr']:+.3f} dB, SSIM {c['ssim'] - d['ssim']:+.4f}; trained through nerfbaselines "
        f"- train.py: PSNR {c['psnr'] - a['psnr']:+.3f} dB (train.py seed 1 - seed 0: {b['psnr'] - a['psnr']:+.3f} dB)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
