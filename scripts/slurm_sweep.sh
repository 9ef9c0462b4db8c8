#!/usr/bin/env bash
# Submit a versioned sweep to SLURM through Hydra's submitit launcher (conf/hydra/launcher/slurm.yaml),
# one SLURM job per grid point, then aggregate once they are done. Run it on the cluster's login node
# from the repository root:
#
#   scripts/slurm_sweep.sh heads 'partition=gpu' 'seed=0,1,2,3,4 trainer.accelerator=gpu'
#
# $1 the sweep (conf/sweep/<name>.yaml); $2 launcher keys (hydra.launcher.<key>=...), space-separated;
# $3 further headlab-train overrides. The sweep dir is printed last; `headlab-aggregate` it when the
# jobs have finished (submitit waits for them unless hydra.launcher.submitit_folder says otherwise).
set -euo pipefail
sweep=${1:?usage: scripts/slurm_sweep.sh SWEEP [LAUNCHER_KEYS] [OVERRIDES]}
launcher_keys=${2:-}
overrides=${3:-}
bin=${HEADLAB_BIN:-.venv/bin}
stamp=$(date +%Y-%m-%d_%H-%M-%S_%6N)
keys=()
for kv in $launcher_keys; do keys+=("hydra.launcher.$kv"); done
# shellcheck disable=SC2086  # overrides are words on purpose
"$bin/headlab-train" -m "sweep=$sweep" hydra/launcher=slurm "hydra.sweep.dir=\${paths.log_dir}/sweeps/\${sweep_name}/$stamp" \
  "${keys[@]}" $overrides
dir=$(ls -d "${HEADLAB_LOG_DIR:-logs}"/sweeps/*/"$stamp")
"$bin/headlab-aggregate" "$dir"
echo "$dir"
