#!/usr/bin/env bash
# Clippy (-D warnings) on every library and binary crate of the workspace with the feature sets
# users build: default features, no features, each feature on its own, and all features (what
# `cargo hack --each-feature` does, without installing it). Default features also check every
# target (tests, examples, benches), since `cargo test --workspace` builds them that way.
#
# Usage: scripts/feature-matrix.sh [crate...]   (default: every publishable crate)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# "<crate> <feature> <feature>..." for each crate that is published (test fixtures are not).
matrix=$(cargo metadata --format-version 1 --no-deps | python3 -c '
import json, sys
meta = json.load(sys.stdin)
for package in meta["packages"]:
    if package.get("publish") == []:
        continue
    features = sorted(f for f in package["features"] if f != "default" and not f.startswith("_"))
    print(package["name"], *features)
')

# native-tls needs OpenSSL's headers; install them where they are missing (Debian).
if ! pkg-config --exists openssl 2>/dev/null; then
  if command -v apt-get >/dev/null && [[ $(id -u) == 0 ]]; then
    apt-get install -y -qq libssl-dev pkg-config >/dev/null
  fi
fi

want=("$@")
run() {
  echo "+ cargo clippy $*" >&2
  cargo clippy --quiet "$@" -- -D warnings
}
while read -r crate features; do
  if ((${#want[@]})) && [[ ! " ${want[*]} " == *" $crate "* ]]; then
    continue
  fi
  run -p "$crate" --all-targets
  run -p "$crate" --no-default-features
  for feature in $features; do
    if [[ $feature == native-tls ]] && ! pkg-config --exists openssl 2>/dev/null; then
      echo "feature-matrix: skipping $crate/$feature: OpenSSL headers are not installed" >&2
      continue
    fi
    run -p "$crate" --no-default-features --features "$feature"
  done
  run -p "$crate" --all-features --all-targets
done <<<"$matrix"
