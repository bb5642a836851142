#!/usr/bin/env bash
# The prepared GPU check (docs/rasterizer.md, "Checking the CUDA path"): one script, so that a lent GPU's
# few minutes go to measuring. Run from the repository root on a CUDA machine with the image's torch:
#   OUT=/some/dir bash scripts/gpu/check.sh [SCENE_DIR]
# Carried beside the tree (git-ignored): .whl/ (gsplat 1.5.3, plyfile, lpips wheels: `pip download`),
# .devcarry/base_c9f706a/ (`git archive c9f706a pointrix_lite configs | tar -x -C .devcarry/base_c9f706a`, the
# code issue 44 started from) and SCENE_DIR, a COLMAP scene (images/ + sparse/0).
# A gsplat build brought back from an earlier call (its $OUT/gsplat_cuda.so.xz, same image) may be carried as
# .devcarry/gsplat_cuda.so.xz: it is loaded through a gsplat.csrc shim instead of building (~60-90 s).
# STAGES (default: all, in this order) picks stages by name; FIRST_RUN_STEPS (3000) the first run's length.
# Stages, each cut off so the whole script ends within $BUDGET seconds (default 570):
#   1. first training run on this machine (gsplat's kernels build inside it, announced), 3000 steps of
#      configs/colmap_cpu.yaml at a GPU's budget (SH 3, MCMC to 1M Gaussians): a trained 1M model
#   2. pytest -m cuda (gsplat against native, the Triton kernels compiled, CUDA training runs)
#   3. python3 -m benchmarks gpu_step on that model: step time against gsplat's kernel time, this tree and c9f706a
#   4. configs/colmap_gpu.yaml for 7000 steps
#   5. what colmap_cpu.yaml's multi-view error scores cost per step on the GPU (during densification)
#   6. masked_step: a masked step against an unmasked one on that model (issue 43: <= 1.1x), this tree and,
#      with .devcarry/base_masked/ (`git archive REV pointrix_lite configs`, REV before the masked Triton kernels),
#      that tree's masked step; masks from .devcarry/scene_masks/ (one PNG per image) or all-kept ones
#   7. appearance_step: gpu_step's step on the masked scene without AppearanceOptHook, with its gain_bias
#      and with its bilateral grid + falloff (and the grid on .devcarry/base_appearance/, if carried)
#   8. appearance: 800 steps of colmap_cpu.yaml on the masked scene, plain and with AppearanceOptHook
#      (bilateral grid + vignetting falloff): the per-view corrections train on CUDA, and at what cost
set -uo pipefail
OUT=${OUT:-/tmp/gpu_check}
SCENE=${1:-.devcarry/scene}
BUDGET=${BUDGET:-570}
START=$(date +%s)
mkdir -p "$OUT"
export POINTRIX_LPIPS_DOWNLOAD=0 PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} MAX_JOBS=${MAX_JOBS:-16}
left() { echo $((BUDGET - ($(date +%s) - START))); }
LOGS=/tmp/gpu_check_logs && mkdir -p $LOGS
stage() {  # stage NAME MAX_SECONDS CMD...: cut off at MAX_SECONDS or the budget; whole log into $OUT/all.log
    local name=$1 max=$2; shift 2
    local t=$(left); [ "$t" -gt "$max" ] && t=$max
    if [ "$t" -lt 15 ]; then echo "== $name: skipped, budget spent"; return 0; fi
    echo "== $(date +%T) $name (up to ${t}s)"
    timeout "$t" "$@" > "$LOGS/$name.log" 2>&1
    local rc=$?
    { echo "===== $name rc=$rc"; cat "$LOGS/$name.log"; } >> "$OUT/all.log"
    echo "   rc=$rc, $(( $(date +%s) - START ))s in; last lines:"; tail -n "${TAIL:-6}" "$LOGS/$name.log" | sed 's/^/   | /'
    return 0
}

python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
if [ -f .devcarry/gsplat_cuda.so.xz ]; then  # gsplat imports gsplat.csrc first: a prebuilt library skips the JIT
    xz -dc .devcarry/gsplat_cuda.so.xz > /tmp/gsplat_cuda.so
    printf '%s\n' 'import importlib.machinery as m, importlib.util as u' \
        'l = m.ExtensionFileLoader("gsplat_cuda", "/tmp/gsplat_cuda.so"); s = u.spec_from_loader("gsplat_cuda", l)' \
        'mod = u.module_from_spec(s); l.exec_module(mod)' \
        'globals().update({k: v for k, v in vars(mod).items() if not k.startswith("__")})' > /tmp/site/gsplat/csrc.py
fi
STAGES=${STAGES:-"first_run cuda_tests step_bench ours_7k error_scores_bench masked_step appearance_step appearance"}
want() { [[ " $STAGES " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
lscpu | grep -m1 "Model name"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
SCENE_RUN=/tmp/scene && rm -rf $SCENE_RUN && cp -r "$SCENE" $SCENE_RUN
SCENE_MASKED=/tmp/scene_masked && rm -rf $SCENE_MASKED && mkdir -p $SCENE_MASKED && cp -r $SCENE_RUN/sparse $SCENE_MASKED/ \
    && ln -s $SCENE_RUN/images $SCENE_MASKED/images && mkdir -p $SCENE_MASKED/masks
if [ -d .devcarry/scene_masks ]; then cp .devcarry/scene_masks/*.png $SCENE_MASKED/masks/; else
    python3 -c "import sys, pathlib, PIL.Image as I; [I.new('L', I.open(f).size, 255).save(pathlib.Path(sys.argv[2]) / (f.stem + '.png'))
        for f in sorted(pathlib.Path(sys.argv[1]).iterdir())]" $SCENE_RUN/images $SCENE_MASKED/masks; fi
GPU_BUDGET="model.sh_degree=3 strategy.cap_max=1000000 strategy.growth_rate=0.05 strategy.steps_scaler=0.25 dataset.scale=1"
want first_run && TAIL=14 stage first_run 260 python3 scripts/train.py --config configs/colmap_cpu.yaml dataset.data_path=$SCENE_RUN \
    $GPU_BUDGET trainer.max_steps=${FIRST_RUN_STEPS:-3000} save_ckpt_after_iter=0 exp_dir=/tmp/run_1m
BUILD=$(python3 -c "from torch.utils.cpp_extension import _get_build_directory as g; print(g('gsplat_cuda', False))")
[ -f "$BUILD/gsplat_cuda.so" ] && xz -T0 -c "$BUILD/gsplat_cuda.so" > "$OUT/gsplat_cuda.so.xz"  # for a later call
[ -f /tmp/run_1m/metrics.json ] && { echo "===== first_run metrics.json"; cat /tmp/run_1m/metrics.json; } >> "$OUT/all.log"
# The files that hold cuda-marked tests (collecting the whole suite would need every dev package there)
CUDA_TESTS=$(grep -rl --include='test_*.py' -e needs_cuda -e CUDA_ONLY -e ON_CUDA tests)
want cuda_tests && TAIL=12 stage cuda_tests 120 python3 -m pytest -m cuda -q -ra -p no:cacheprovider $CUDA_TESTS
want step_bench && TAIL=70 stage step_bench 150 python3 -m benchmarks gpu_step --ply /tmp/run_1m/point_cloud.ply --data $SCENE_RUN \
    --tree new=. --tree c9f706a=.devcarry/base_c9f706a --rounds 1 --steps 40
want ours_7k && TAIL=12 stage ours_7k 170 python3 scripts/train.py --config configs/colmap_gpu.yaml dataset.data_path=$SCENE_RUN \
    trainer.max_steps=7000 exp_dir=/tmp/run_gpu7k
[ -f /tmp/run_gpu7k/metrics.json ] && { echo "===== ours_7k metrics.json"; cat /tmp/run_gpu7k/metrics.json; } >> "$OUT/all.log"
want error_scores_bench && TAIL=40 stage error_scores_bench 90 python3 -m benchmarks gpu_step --ply /tmp/run_1m/point_cloud.ply --data $SCENE_RUN \
    --start-step 3000 --tree scored=. --tree plain=.+strategy.error_every=0+strategy.error_weight=0.0 --rounds 1 --steps 40
BASE_MASKED=()
[ -d .devcarry/base_masked/pointrix_lite ] && BASE_MASKED=(--tree "masked_before=.devcarry/base_masked+dataset.data_path=$SCENE_MASKED")
want masked_step && TAIL=60 stage masked_step 140 python3 -m benchmarks gpu_step --ply /tmp/run_1m/point_cloud.ply --data $SCENE_RUN \
    --tree unmasked=. --tree masked=.+dataset.data_path=$SCENE_MASKED "${BASE_MASKED[@]}" --rounds 1 --steps 40
APPEARANCE="{type: AppearanceOptHook, mode: bilagrid, vignetting: true}"
BASE_APP=()
[ -d .devcarry/base_appearance/pointrix_lite ] && BASE_APP=(--tree "grid_before=.devcarry/base_appearance+hooks=[$APPEARANCE]")
want appearance_step && TAIL=80 stage appearance_step 180 python3 -m benchmarks gpu_step --ply /tmp/run_1m/point_cloud.ply \
    --data $SCENE_MASKED --keep-hook AppearanceOptHook --tree plain=. --tree "gain_bias=.+hooks=[{type: AppearanceOptHook}]" \
    --tree "grid=.+hooks=[$APPEARANCE]" "${BASE_APP[@]}" --rounds 1 --steps 40
for run in plain appearance; do
    hooks="hooks=[{type: PlyExportHook}, {type: PoseOptHook, refine: false, test_align_steps: 100}, {type: ResolutionScheduleHook, start_factor: 4, full_res_at: 0.3, hold_means_lr: true}"
    [ $run = appearance ] && hooks="$hooks, $APPEARANCE"
    want appearance && TAIL=8 stage appearance_$run 60 python3 scripts/train.py --config configs/colmap_cpu.yaml \
        dataset.data_path=$SCENE_MASKED trainer.max_steps=800 trainer.val_interval=0 save_ckpt_after_iter=0 "$hooks]" exp_dir=/tmp/run_$run
done
echo "== done in $(( $(date +%s) - START ))s"
