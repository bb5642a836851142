"""Every row of docs/errors.md, through the real command line: exit 2, one line, the documented message.

The test reads the table, so the documentation and the code cannot drift apart: a changed message
fails its row, a row without a set-up here (or a set-up without a row) fails the coverage test.
Rows run with the pure-torch rasterizer, whose import prints nothing (the native build's import logs a
torch warning), as ``scripts/train.py``'s ``main()`` in forked children of one process that imported
what it imports (fork_runner.py): they are mostly start-up time, ~3 s of imports each.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from pointrix_lite.data.pointcloud import PointCloud, write_ply_points
from pointrix_lite.engine.experiment import load_experiment
from pointrix_lite.engine.trainer import DefaultTrainer
from pointrix_lite.renderer.native._build import ARCH_ENV
from pointrix_lite.renderer.native.cpu_check import cpu_flags, target_flags

from .cli_helpers import FAULT_PLUGIN, REPO, write_config
from .fork_runner import run_forked
from .scene import real_raw_config

DOC = REPO / "docs" / "errors.md"
ROW = re.compile(r"^\| `([a-z0-9-]+)` \| (.+?) \| `(.+)` \|$", re.M)


def doc_rows() -> dict[str, str]:
    """``{row id: message template}`` from docs/errors.md."""
    return {rid: message for rid, _, message in ROW.findall(DOC.read_text())}


def template_regex(template: str) -> re.Pattern:
    """``<placeholder>`` matches any text; everything else literally."""
    parts = re.split(r"<[^<>]+>", template)
    return re.compile(".+".join(re.escape(p) for p in parts))


class Evil:
    """A pickle payload: unpickling it calls ``os.system``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class Case:
    """Builds the inputs of one row under ``root`` and returns the command-line arguments."""

    def __init__(self, root: Path, scene: Path, checkpoint: Path) -> None:
        self.root, self.scene, self.checkpoint = root, scene, checkpoint
        self.raw = real_raw_config(root / "out", scene, "torch", max_steps=2)
        self.raw["hooks"][1]["interval"] = 1
        self.must_not_exist: Path | None = None  # a side effect that must not happen
        self.env: dict[str, str] = {}  # environment variables of the run

    def config(self, **top) -> str:
        return str(write_config(self.root / "run.yaml", {**self.raw, **top}))

    def scene_copy(self) -> Path:
        return Path(shutil.copytree(self.scene, self.root / "scene"))


def _earlier_run(c: Case) -> list[str]:
    exp = Path(c.raw["output_dir"]) / c.raw["name"]
    exp.mkdir(parents=True)
    (exp / "metrics.json").write_text("{}")  # a finished run's file: it must survive the refusal
    c.must_not_exist = exp / "config.yaml"
    return ["--config", c.config()]


def _resume_and_overwrite(c: Case) -> list[str]:
    return ["--config", c.config(), "--resume", "--overwrite"]


def _overwrite_own_checkpoint(c: Case) -> list[str]:
    exp = Path(c.raw["output_dir"]) / c.raw["name"]
    (exp / "checkpoints").mkdir(parents=True)
    own = shutil.copy(c.checkpoint, exp / "checkpoints")  # exp_dir's own: --overwrite would delete it
    c.must_not_exist = exp / "config.yaml"  # refused before the run started
    return ["--config", c.config(load_ckpt_before_run=str(own)), "--overwrite"]


def _seed_out_of_range(c: Case) -> list[str]:
    return ["--config", c.config(), "seed=-1"]


def _name_too_long(c: Case) -> list[str]:
    return ["--config", c.config(), "name=" + "n" * 300]


def _config_too_large(c: Case) -> list[str]:
    path = c.root / "big.yaml"
    path.write_text("name: " + "n" * (2 << 20) + "\n")
    return ["--config", str(path)]


def _yaml_alias_bomb(c: Case) -> list[str]:
    path = Path(c.config())
    levels = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    levels += [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]
    path.write_text(path.read_text() + "\n".join(levels) + "\n")
    return ["--config", str(path)]


def _yaml_merge_chain(c: Case) -> list[str]:
    path = Path(c.config())
    chain = ["l0: &l0 {k0: 1}"] + [f"l{i}: &l{i} {{<<: *l{i - 1}, k{i}: 1}}" for i in range(1, 8000)]
    path.write_text(path.read_text() + "x:\n" + "".join(f"  {line}\n" for line in chain))
    return ["--config", str(path)]


def _yaml_unreadable_value(c: Case) -> list[str]:
    path = Path(c.config())
    path.write_text(path.read_text().replace("seed: ", "seed: 2001-13-01 # ", 1))
    return ["--config", str(path)]


def _missing_config(c: Case) -> list[str]:
    return ["--config", str(c.root / "missing.yaml")]


def _unsafe_yaml_tag(c: Case) -> list[str]:
    c.must_not_exist = c.root / "pwned"
    path = Path(c.config())
    # Replace the seed line rather than append a second one: a repeated key is its own error now.
    kept = [line for line in path.read_text().splitlines() if not line.startswith("seed:")]
    path.write_text("\n".join(kept) + f'\nseed: !!python/object/apply:os.system ["touch {c.must_not_exist}"]\n')
    return ["--config", str(path)]


def _missing_data_dir(c: Case) -> list[str]:
    return ["--config", c.config(), f"dataset.data_path={c.root / 'no_such_scene'}"]


def _corrupt_image(c: Case) -> list[str]:
    scene = c.scene_copy()
    (scene / "train" / "r_0.png").write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    return ["--config", c.config(), f"dataset.data_path={scene}"]


def _random_background_transparent(c: Case) -> list[str]:
    return ["--config", c.config(), "trainer.random_background=true"]  # the tiny scene's PNGs are RGBA


def _several_mask_folders(c: Case) -> list[str]:
    scene = c.scene_copy()
    (scene / "masks").mkdir()
    (scene / "segmentation").mkdir()
    return ["--config", c.config(), f"dataset.data_path={scene}"]


def _empty_point_cloud(c: Case) -> list[str]:
    scene = c.scene_copy()
    write_ply_points(scene / "points3d.ply", PointCloud.from_numpy(np.zeros((0, 3)), np.zeros((0, 3))))
    return ["--config", c.config(), f"dataset.data_path={scene}"]


def _unsupported_camera_model(c: Case) -> list[str]:
    root = c.root / "colmap"
    (root / "sparse" / "0").mkdir(parents=True)
    (root / "images").mkdir()
    (root / "sparse" / "0" / "cameras.txt").write_text("1 EQUIRECTANGULAR 32 32 16 16\n")
    (root / "sparse" / "0" / "images.txt").write_text("1 1 0 0 0 0 0 4 1 a.png\n\n")
    (root / "sparse" / "0" / "points3D.txt").write_text("1 0 0 0 255 0 0 0\n")
    shutil.copy(c.scene / "train" / "r_0.png", root / "images" / "a.png")
    c.raw["dataset"] = {"type": "ColmapDataset", "data_path": str(root), "eval": False}
    return ["--config", c.config()]


def _unknown_config_key(c: Case) -> list[str]:
    return ["--config", c.config(), "model.sh_degre=2"]


def _wrong_type(c: Case) -> list[str]:
    return ["--config", c.config(), "trainer.max_steps=many"]


def _unknown_registry_name(c: Case) -> list[str]:
    return ["--config", c.config(), "model.type=GausianModel"]


def _out_of_range_value(c: Case) -> list[str]:
    return ["--config", c.config(), "model.sh_degree=5"]


def _lpips_net(c: Case) -> list[str]:
    return ["--config", c.config(), "model.lpips_net=squeeze"]


def _lpips_download_switch(c: Case) -> list[str]:
    c.env["POINTRIX_LPIPS_DOWNLOAD"] = "maybe"
    c.must_not_exist = c.root / "out" / "checkpoints"  # refused when the config loads, not at the first validation
    return ["--config", c.config()]


def _upsampling_scale(c: Case) -> list[str]:
    return ["--config", c.config(), "dataset.scale=0.25"]


def _scale_too_small(c: Case) -> list[str]:
    return ["--config", c.config(), "dataset.scale=100"]


def _native_arch(c: Case, arch: str) -> list[str]:
    c.env[ARCH_ENV] = arch
    c.raw["renderer"] = {"type": "GaussianRenderer", "backend": "auto"}  # asked for by the variable, even under auto
    c.must_not_exist = c.root / "out" / "checkpoints"  # refused before the first step
    return ["--config", c.config()]


def _native_arch_rejected(c: Case) -> list[str]:
    return _native_arch(c, "no-such-cpu")


def _native_arch_lacking(c: Case) -> list[str]:
    # Every CPU lacks one of these: AMX (Sapphire Rapids) is Intel's alone, AVX512-VP2INTERSECT (Tiger Lake)
    # is absent from Sapphire/Granite Rapids.
    have = cpu_flags()
    lacking = [a for a in ("sapphirerapids", "tigerlake") if not set(target_flags(a)) <= have]
    assert lacking, "this CPU has every flag of both targets"
    return _native_arch(c, lacking[0])


def _cuda_without_cuda(c: Case) -> list[str]:
    return ["--config", c.config(), "device=cuda"]


def _gsplat_on_cpu(c: Case) -> list[str]:
    return ["--config", c.config(), "device=cpu", "renderer.backend=gsplat"]


def _hook_plugin(c: Case, filename: str, hook_class: str) -> Path:
    """A plugin file registering ``hook_class`` (source text of one Hook subclass)."""
    plugin = c.root / filename
    plugin.write_text(
        "from pointrix_lite.engine.hooks import Hook\n"
        "from pointrix_lite.registry import HOOKS\n\n\n"
        f"@HOOKS.register()\n{hook_class}"
    )
    return plugin


def _plugin_duplicate_name(c: Case) -> list[str]:
    plugin = _hook_plugin(c, "my_hooks.py", "class LogHook(Hook):\n    pass\n")
    return ["--config", c.config(), "--plugin", str(plugin)]


def _hook_site_signature(c: Case) -> list[str]:
    source = "class PointCountHook(Hook):\n    def after_train_iter(self, trainner):\n        pass\n"
    plugin = _hook_plugin(c, "point_count.py", source)
    c.raw["hooks"].append({"type": "PointCountHook"})
    return ["--config", c.config(), "--plugin", str(plugin)]


def _hooks_mapping_entry(c: Case) -> list[str]:
    return ["--config", c.config(hooks={"LogHook": 50})]


def _duplicate_yaml_key(c: Case) -> list[str]:
    path = Path(c.config(hooks={"LogHook": {"interval": 5}}))
    path.write_text(path.read_text() + "hooks: {CheckPointHook: {}}\n")  # a second top-level `hooks:`
    return ["--config", str(path)]


def _unwritable_output_dir(c: Case) -> list[str]:
    (c.root / "a_file").write_text("a file where the output folder should go")
    return ["--config", c.config(), f"output_dir={c.root / 'a_file'}"]


def _disk_full_at_start(c: Case) -> list[str]:
    c.raw["hooks"].append({"type": "DiskFaultHook", "free_bytes": 1000})
    return ["--config", c.config(), "--plugin", str(FAULT_PLUGIN)]


def _disk_full_during_training(c: Case) -> list[str]:
    c.raw["hooks"].append({"type": "DiskFaultHook", "enospc_on_save": 2})
    return ["--config", c.config(), "--plugin", str(FAULT_PLUGIN)]


def _nan_loss(c: Case) -> list[str]:
    c.raw["hooks"] += [{"type": "NaNGuardHook"}, {"type": "CorruptParamHook", "step": 2, "param": "sh0"}]
    return ["--config", c.config(), "--plugin", str(FAULT_PLUGIN)]


def _resume_without_checkpoint(c: Case) -> list[str]:
    return ["--config", c.config(), "--resume"]


def _resume_missing_checkpoint(c: Case) -> list[str]:
    return ["--config", c.config(), "--resume", str(c.root / "step_000100.pth")]


def _resume_truncated_checkpoint(c: Case) -> list[str]:
    cut = c.root / "cut.pth"
    data = c.checkpoint.read_bytes()
    cut.write_bytes(data[: len(data) * 2 // 3])  # what a crash during a plain (non-atomic) copy leaves
    return ["--config", c.config(), "--resume", str(cut)]


def _resume_pickle_payload(c: Case) -> list[str]:
    c.must_not_exist = c.root / "pwned"
    evil = c.root / "evil.pth"
    torch.save({"format": 1, "step": 0, "payload": Evil(c.must_not_exist)}, evil)
    return ["--config", c.config(), "--resume", str(evil)]


def _resume_other_config(c: Case) -> list[str]:
    return ["--config", c.config(), "--resume", str(c.checkpoint), "model.sh_degree=2"]


SETUPS: dict[str, Callable[[Case], list[str]]] = {
    "missing-config": _missing_config,
    "unsafe-yaml-tag": _unsafe_yaml_tag,
    "unknown-config-key": _unknown_config_key,
    "wrong-type": _wrong_type,
    "unknown-registry-name": _unknown_registry_name,
    "missing-data-dir": _missing_data_dir,
    "corrupt-image": _corrupt_image,
    "random-background-transparent": _random_background_transparent,
    "several-mask-folders": _several_mask_folders,
    "unsupported-camera-model": _unsupported_camera_model,
    "empty-point-cloud": _empty_point_cloud,
    "resume-without-checkpoint": _resume_without_checkpoint,
    "resume-missing-checkpoint": _resume_missing_checkpoint,
    "resume-truncated-checkpoint": _resume_truncated_checkpoint,
    "resume-pickle-payload": _resume_pickle_payload,
    "resume-other-config": _resume_other_config,
    "unwritable-output-dir": _unwritable_output_dir,
    "out-of-range-value": _out_of_range_value,
    "lpips-net": _lpips_net,
    "lpips-download-switch": _lpips_download_switch,
    "upsampling-scale": _upsampling_scale,
    "native-arch-rejected": _native_arch_rejected,
    "native-arch-lacking": _native_arch_lacking,
    "scale-too-small": _scale_too_small,
    "cuda-without-cuda": _cuda_without_cuda,
    "gsplat-on-cpu": _gsplat_on_cpu,
    "plugin-duplicate-name": _plugin_duplicate_name,
    "hook-site-signature": _hook_site_signature,
    "hooks-mapping-entry": _hooks_mapping_entry,
    "duplicate-yaml-key": _duplicate_yaml_key,
    "disk-full-at-start": _disk_full_at_start,
    "disk-full-during-training": _disk_full_during_training,
    "nan-loss": _nan_loss,
    "earlier-run": _earlier_run,
    "resume-and-overwrite": _resume_and_overwrite,
    "overwrite-own-checkpoint": _overwrite_own_checkpoint,
    "seed-out-of-range": _seed_out_of_range,
    "name-too-long": _name_too_long,
    "config-too-large": _config_too_large,
    "yaml-alias-bomb": _yaml_alias_bomb,
    "yaml-merge-chain": _yaml_merge_chain,
    "yaml-unreadable-value": _yaml_unreadable_value,
}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory, tiny_scene) -> dict[str, tuple[subprocess.CompletedProcess, Case]]:
    """Run every row's command line (4 at a time); ``{row id: (result, case)}``."""
    base = tmp_path_factory.mktemp("errors")
    raw = real_raw_config(base / "ckpt_run", tiny_scene, "torch", max_steps=1)
    raw["model"]["sh_degree"] = 1
    cfg = load_experiment(None, data=raw)
    trainer = DefaultTrainer(cfg, cfg.exp_dir, "cpu")
    trainer.run()
    checkpoint = Path(cfg.exp_dir) / "checkpoints" / "step_000001.pth"

    cases = {}
    for rid, setup in SETUPS.items():
        (base / rid).mkdir()
        case = Case(base / rid, tiny_scene, checkpoint)
        cases[rid] = (setup(case), case)

    results = run_forked([(args, case.env) for args, case in cases.values()], parallel=4)
    return {rid: (res, case) for (rid, (_, case)), res in zip(cases.items(), results, strict=True)}


def test_every_row_has_a_setup_and_every_setup_a_row():
    assert sorted(doc_rows()) == sorted(SETUPS)


@pytest.mark.parametrize("rid", sorted(SETUPS))
def test_row(rid, outcomes):
    if rid == "cuda-without-cuda" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    res, case = outcomes[rid]
    template = doc_rows()[rid]
    lines = res.stderr.splitlines()
    assert res.returncode == 2, res.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr  # one line, no traceback
    message = lines[0].removeprefix("error: ")
    assert template_regex(template).fullmatch(message), f"\n doc: {template}\n got: {message}"
    if case.must_not_exist is not None:
        assert not case.must_not_exist.exists()  # the payload never ran
