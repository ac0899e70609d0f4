#!/usr/bin/env bash
# make check-deploy: deploy/detinfer.service and deploy/Dockerfile.
#   tests/deploy/run.sh ROOT BUILD_DIR REAL_MODEL CACHE_DIR
# 1. the unit: systemd-analyze verify says nothing about it (with ExecStart on
#    the tree's build of the command), and does about a unit with a typo; systemd-analyze
#    security's exposure at most 2.0 (the sandbox holds);
# 2. the Dockerfile copies exactly what the C build reads (csources.py);
# 3. with podman, when it can run containers here: the image built on the
#    debootstrap base of tests/wheel (imported as an image), run with the
#    real model mounted read-only, as a user other than root, healthy by its
#    healthcheck, answering a completion with the make build's digest, and
#    stopping with status 0 on SIGTERM. Where podman cannot run a container,
#    the error is printed and this part is skipped (the chroot test of make
#    check-wheel is then the proof that the artifacts run on a bare Debian).
set -euo pipefail
root=$(cd "$1" && pwd) build=$2 real=$3 cache=$4
work=$build/deploy
mkdir -p "$work"
work=$(cd "$work" && pwd)
py=${PYTHON:-python3}

echo "== deploy/detinfer.service: systemd-analyze verify and security"
unit=$work/detinfer.service
sed "s|/usr/local/bin/detinfer|$build/tools/detinfer|" "$root/deploy/detinfer.service" > "$unit"
# verify exits 0 on a value it cannot parse (it says so and ignores the line):
# a clean unit is one it says nothing about.
verify() { systemd-analyze verify --man=no "$1" 2>&1 || echo "systemd-analyze verify exited $?"; }
out=$(verify "$unit")
[ -z "$out" ] || { echo "$out"; echo "check-deploy: systemd-analyze verify complains"; exit 1; }
sed 's/^ProtectSystem=strict/ProtectSystem=stricter/' "$unit" > "$work/typo.service"
[ -n "$(verify "$work/typo.service")" ] ||
    { echo "check-deploy: systemd-analyze verify said nothing about a unit with a typo: it checks nothing"; exit 1; }
exposure=$(systemd-analyze security --offline=yes "$unit" 2>&1 | sed -n 's/.*Overall exposure level for .*: \([0-9.]*\) .*/\1/p')
echo "exposure $exposure (systemd-analyze security: 0 is the most sandboxed, 10 the least)"
awk -v e="$exposure" 'BEGIN { exit !(e != "" && e <= 2.0) }' || { echo "check-deploy: exposure '$exposure' above 2.0"; exit 1; }
for key in DynamicUser=yes ProtectSystem=strict NoNewPrivileges=yes KillSignal=SIGTERM Restart=on-failure; do
    grep -qx "$key" "$unit" || { echo "check-deploy: the unit lacks $key"; exit 1; }
done

echo "== deploy/Dockerfile copies what the C build reads"
want=$(cd "$root/bindings/python" && "$py" -c 'from buildsupport import csources as c; print(" ".join(sorted(c.BUILD_FILES + c.BUILD_DIRS)))')
got=$(sed -n 's/^COPY \([^-].*\) [^ ]*$/\1/p' "$root/deploy/Dockerfile" | tr ' ' '\n' | sort | paste -sd' ')
[ "$got" = "$want" ] || { echo "check-deploy: the Dockerfile copies '$got', the C build reads '$want'"; exit 1; }

echo "== the image, with podman"
if ! command -v podman >/dev/null; then
    echo "check-deploy: podman is not installed: the image is not built (make check-wheel's chroot is the proof)"; exit 0
fi
[ -n "$real" ] && [ -f "$real" ] || { echo "check-deploy: SKIPPED the image: no real model"; exit 0; }
# The limits a container may not raise where CAP_SYS_RESOURCE is missing (a
# container host): podman's defaults are higher than such a host allows.
run=(podman --runtime "${PODMAN_RUNTIME:-runc}")
limits=(--ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
base=localhost/detinfer-debian12-base:bookworm
tarball=$cache/debian12-python3-base.tar.zst
bash "$root/tests/wheel/chroot_base.sh" "$tarball"
if ! "${run[@]}" image exists "$base"; then
    zstd -q -dc "$tarball" | "${run[@]}" import - "$base" >"$work/import.log" 2>&1 || { cat "$work/import.log"; exit 1; }
fi
if ! probe=$("${run[@]}" run --rm "${limits[@]}" "$base" /bin/true 2>&1); then
    echo "check-deploy: podman cannot run a container here: $probe"
    echo "check-deploy: the image is not built; make check-wheel's chroot test is the proof on a bare Debian"
    exit 0
fi
tag=localhost/detinfer-check:latest
start=$(date +%s)
"${run[@]}" build --format docker "${limits[@]}" --build-arg BASE="$base" -f "$root/deploy/Dockerfile" -t "$tag" \
    "$root" > "$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
echo "built $tag in $(( $(date +%s) - start )) s"
"$py" "$root/tests/wheel/expect.py" "$build/tools/detinfer" "$real" "$work/expect.json"
name=detinfer-check-$$
"${run[@]}" rm -f "$name" >/dev/null 2>&1 || true
# (without systemd, podman says it cannot schedule the healthcheck's timer: it is run by hand below)
"${run[@]}" run -d --name "$name" "${limits[@]}" -p 127.0.0.1::8080 -v "$real:/models/model.gguf:ro" "$tag" \
    >"$work/run.log" 2>&1 || { cat "$work/run.log"; exit 1; }
trap '"${run[@]}" rm -f "$name" >/dev/null 2>&1 || true' EXIT
port=$("${run[@]}" port "$name" 8080 | sed 's/.*://')
uid=$("${run[@]}" exec "$name" id -u)
[ "$uid" != 0 ] || { echo "check-deploy: the server runs as root"; exit 1; }
for _ in $(seq 60); do "${run[@]}" healthcheck run "$name" >/dev/null 2>&1 && break; sleep 2; done
"${run[@]}" healthcheck run "$name" || { "${run[@]}" logs "$name" | tail; echo "check-deploy: unhealthy"; exit 1; }
"$py" - "$port" "$work/expect.json" <<'PY'
import json, sys, urllib.request
port, expect = sys.argv[1], json.load(open(sys.argv[2]))
first = expect["runs"][0]
body = json.dumps({"model": "m", "prompt": first["prompt_text"], "max_tokens": expect["max_new"], "temperature": 0})
req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body.encode(),
                             headers={"Content-Type": "application/json"})
got = json.load(urllib.request.urlopen(req, timeout=120))["detinfer"]["sequence_digest"]
assert got == first["sequence_digest"], (got, first["sequence_digest"])
print(f"the container's completion: {got}, the make build's digest")
PY
"${run[@]}" stop -t 40 "$name" >/dev/null 2>>"$work/run.log"
status=$("${run[@]}" inspect "$name" --format '{{.State.ExitCode}}')
[ "$status" = 0 ] || { "${run[@]}" logs "$name" | tail; echo "check-deploy: exit status $status after SIGTERM"; exit 1; }
echo "the container ran as uid $uid, was healthy, answered, and stopped with status 0 on SIGTERM"
"${run[@]}" image prune -f >/dev/null  # the build stage's and earlier builds' untagged images
echo "check-deploy: OK"
