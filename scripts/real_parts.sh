#!/usr/bin/env bash
# Prepare the real parts the sandbox tests need: bubblewrap, debootstrap, Docker with the runsc
# (gVisor) runtime registered, a running dockerd, and the locally built sandbox images.
#
# Called by `make test` before pytest, on a clean clone. Idempotent and quick when everything is
# already in place. As root it installs and starts what is missing; otherwise it only reports what
# is missing and exits 0, so that the tests themselves report (skip outside CI, fail in CI).
# Every wait has a deadline: this script must never hang a CI run.
set -uo pipefail
cd "$(dirname "$0")/.."

log() { echo "real_parts: $*" >&2; }

DOCKERD_LOG="${ROOST_DOCKERD_LOG:-/var/log/roost-dockerd.log}"
DOCKERD_WAIT_S="${ROOST_DOCKERD_WAIT_S:-90}"
IMAGES_WAIT_S="${ROOST_IMAGES_WAIT_S:-1500}"

need_cmds=(dockerd docker runsc bwrap debootstrap)
pkg_of() {
    case "$1" in
        dockerd | docker) echo docker.io ;;
        runsc) echo runsc ;;
        bwrap) echo bubblewrap ;;
        debootstrap) echo debootstrap ;;
    esac
}

missing_pkgs=()
for c in "${need_cmds[@]}"; do
    if ! command -v "$c" >/dev/null 2>&1; then
        p="$(pkg_of "$c")"
        [[ " ${missing_pkgs[*]-} " == *" $p "* ]] || missing_pkgs+=("$p")
    fi
done

if [[ "$(id -u)" != 0 ]]; then
    if ((${#missing_pkgs[@]})); then
        log "not root; missing packages: ${missing_pkgs[*]} (sandbox tests will skip or fail)"
    fi
    if ! docker info >/dev/null 2>&1; then
        log "not root; dockerd is not reachable (sandbox tests will skip or fail)"
    fi
    exit 0
fi

# 1. Packages. `apt-get update` runs only when an install is needed, and only once.
if ((${#missing_pkgs[@]})); then
    log "installing ${missing_pkgs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! timeout 600 apt-get install -y --no-install-recommends "${missing_pkgs[@]}" >/dev/null; then
        timeout 300 apt-get update >/dev/null || log "apt-get update failed"
        timeout 600 apt-get install -y --no-install-recommends "${missing_pkgs[@]}" >/dev/null ||
            log "apt-get install failed: ${missing_pkgs[*]}"
    fi
fi

# 2. Register runsc in the daemon config, merging with whatever is there already.
RUNSC="$(command -v runsc || true)"
if [[ -n "$RUNSC" ]]; then
    mkdir -p /etc/docker
    changed="$(python3 - "$RUNSC" <<'PY'
import json, os, sys
path = "/etc/docker/daemon.json"
cfg = {}
if os.path.exists(path):
    with open(path) as f:
        text = f.read().strip()
    cfg = json.loads(text) if text else {}
runtimes = cfg.setdefault("runtimes", {})
# --network=none: gVisor's own network stack refuses to start without a bridge here, and
# sandboxes have no network anyway (roost asks for NetworkMode "none").
want = {"path": sys.argv[1], "runtimeArgs": ["--network=none"]}
if runtimes.get("runsc") == want:
    print("no")
else:
    runtimes["runsc"] = want
    with open(path + ".tmp", "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    os.replace(path + ".tmp", path)
    print("yes")
PY
)" || { log "could not update /etc/docker/daemon.json"; changed=no; }
    if [[ "$changed" == yes ]] && docker info >/dev/null 2>&1; then
        # A running daemon reloads its runtimes on SIGHUP; no restart needed.
        pkill -HUP -x dockerd || true
    fi
fi

# 3. Start dockerd when it is not answering.
docker_up() { timeout 10 docker info >/dev/null 2>&1; }
if command -v dockerd >/dev/null 2>&1 && ! docker_up; then
    driver=vfs
    grep -qw overlay /proc/filesystems && driver=overlay2
    log "starting dockerd (storage driver $driver, log $DOCKERD_LOG)"
    mkdir -p "$(dirname "$DOCKERD_LOG")"
    nohup dockerd --iptables=false --bridge=none --storage-driver="$driver" \
        >>"$DOCKERD_LOG" 2>&1 </dev/null &
    deadline=$((SECONDS + DOCKERD_WAIT_S))
    until docker_up; do
        if ((SECONDS >= deadline)); then
            log "dockerd did not answer within ${DOCKERD_WAIT_S}s; see $DOCKERD_LOG"
            break
        fi
        sleep 0.5
    done
fi

# 4. Build the sandbox images once (cached by content hash, so a rerun is a quick check).
if docker_up && [[ -x .venv/bin/roost ]]; then
    timeout "$IMAGES_WAIT_S" .venv/bin/roost sandbox images ||
        log "building the sandbox images failed (exit $?)"
fi
exit 0
