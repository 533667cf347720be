"""Checks the Dockerfile against the workspace without a Docker engine (none runs on the build
machines): every binary target of the workspace is built and copied into the image, dependencies
are cooked in their own layer before the sources are copied, binaries are stripped, the build is
--locked, and the runtime stage runs as a non-root user. Run by scripts/chart-test.sh."""

import json
import os
import re
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))


def dockerfile():
    with open(os.path.join(ROOT, "Dockerfile"), encoding="utf-8") as f:
        return f.read()


def workspace_bins():
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    bins = {}
    for pkg in json.loads(out)["packages"]:
        for t in pkg["targets"]:
            if "bin" in t["kind"]:
                bins[t["name"]] = pkg["name"]
    return bins


def test_every_workspace_binary_is_built_and_copied_into_the_image():
    text = dockerfile()
    packages = set(re.search(r'ARG PACKAGES="([^"]*)"', text).group(1).replace("-p ", "").split())
    copied = set(re.search(r"cp ([a-z\- ]+) /out/", text).group(1).split())
    bins = workspace_bins()
    assert set(bins.values()) <= packages, (bins, packages)
    assert set(bins) == copied, (sorted(bins), sorted(copied))
    assert "buzz-load" in copied  # the distributed load tester and the chart's helm test


def test_dependencies_are_cooked_in_their_own_layer_and_binaries_stripped():
    text = dockerfile()
    cook = text.index("cargo chef cook --release --locked")
    assert cook < text.index("COPY . .", text.index("FROM chef AS build"))
    assert "cargo build --release --locked" in text
    assert "CARGO_PROFILE_RELEASE_STRIP=symbols" in text


def build_arg_default(text, name):
    m = re.search(r"^ARG %s=(\S+)$" % name, text, re.M)
    assert m and m.start() < text.index("\nFROM "), "ARG %s with a default before the first FROM" % name
    return m.group(1)


def test_the_runtime_stage_is_slim_and_runs_as_a_non_root_user():
    text = dockerfile()
    runtime = text[text.rindex("\nFROM "):]
    base = build_arg_default(text, "RUNTIME_IMAGE")
    assert re.fullmatch(r"debian:\S+-slim|\S+/distroless/\S+", base), base
    assert "bookworm" in base  # the same Debian release as the Rust image: the same glibc
    # The base images are build arguments (scripts/image-test.sh passes stand-ins); their defaults
    # are the public images, and nothing else is pulled. Checked here (test_render.py collects this
    # module's tests by name).
    assert build_arg_default(text, "RUST_IMAGE").startswith("lukemathwalker/cargo-chef:")
    assert "-bookworm" in build_arg_default(text, "RUST_IMAGE")
    assert re.search(r"^FROM \$\{RUST_IMAGE\} AS chef$", text, re.M)
    assert runtime.startswith("\nFROM ${RUNTIME_IMAGE}\n"), runtime
    for base in re.findall(r"^FROM (\S+)", text, re.M):
        assert base in ("${RUST_IMAGE}", "${RUNTIME_IMAGE}", "chef"), base
    user = re.search(r"^USER (\d+)(:\d+)?$", runtime, re.M)
    assert user and int(user.group(1)) != 0, runtime
    for port in ("7777", "7070", "7084", "7085"):
        assert port in re.search(r"^EXPOSE (.*)$", runtime, re.M).group(1), port
