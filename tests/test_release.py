"""The release: one version everywhere, a wheel and sdist that carry what an installed plugin needs
(and no tests), a changelog entry for the version, and a tag-driven workflow that publishes it.

The build test makes the distributions from the files git knows about (committed, staged or new,
not ignored), as a clean export would, so that a file left out of the package fails here and not
on a user's machine. `.ci/run` goes further: it installs the wheel in a fresh environment and runs
the example suites from it.
"""

from __future__ import annotations

import email
import email.message
import importlib.metadata
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

import pytest_nl2sql
from pytest_nl2sql.cli import main

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
REPOSITORY = "https://github.com/pytest-nl2sql/pytest-nl2sql"
DOCS = "https://pytest-nl2sql.readthedocs.io/"
# what an installed plugin reads besides its modules: the Malloy compiler's npm package and server
# script (`nl2sql malloy-setup`), and the JSON Schema of the report
DATA_FILES = [
    "pytest_nl2sql/malloy/node/compile.mjs",
    "pytest_nl2sql/malloy/node/package-lock.json",
    "pytest_nl2sql/malloy/node/package.json",
    "pytest_nl2sql/reports/report.schema.json",
]


def test_the_version_is_one_string_in_the_module_the_command_and_the_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    version = pytest_nl2sql.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?(\.dev\d+)?", version), version
    # the installed distribution (`pip install -e .` reads it from the module when it builds)
    assert importlib.metadata.version("pytest-nl2sql") == version
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out == f"pytest-nl2sql {version}\n"
    done = subprocess.run([sys.executable, "-m", "pytest_nl2sql", "--version"], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, f"pytest-nl2sql {version}\n"), done.stderr


def test_pyproject_takes_the_version_from_the_module() -> None:
    """One place to bump: pyproject.toml holds no version of its own."""
    assert "version" not in PYPROJECT["project"] and "version" in PYPROJECT["project"]["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "pytest_nl2sql.__version__"}


def test_the_changelog_has_an_unreleased_section_then_an_entry_for_this_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\](.*)$", text, flags=re.M)
    assert headings and headings[0] == ("Unreleased", ""), headings[:2]
    versions = [name for name, _ in headings[1:]]
    assert versions and versions[0] == pytest_nl2sql.__version__, versions
    assert re.fullmatch(r" - \d{4}-\d{2}-\d{2}", headings[1][1]), headings[1]
    # Keep a Changelog's link references: each heading links to its comparison or tag
    for name in ["Unreleased", *versions]:
        assert re.search(rf"^\[{re.escape(name)}\]: {re.escape(REPOSITORY)}/", text, flags=re.M), name


def test_the_release_workflow_publishes_a_tag_with_trusted_publishing() -> None:
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    trigger = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert trigger["push"]["tags"] == ["v*"]
    jobs = workflow["jobs"]
    steps = [step for job in jobs.values() for step in job["steps"]]
    text = "\n".join(str(step.get("run", "")) for step in steps)
    assert "python -m build" in text and "twine check" in text and "example_suites" in text
    assert "GITHUB_REF_NAME" in text  # the tag is checked against the version being released
    publishers = [name for name, job in jobs.items()
                  if any(str(s.get("uses", "")).startswith("pypa/gh-action-pypi-publish@") for s in job["steps"])]
    assert len(publishers) == 1
    publish = jobs[publishers[0]]
    assert publish["permissions"] == {"id-token": "write"}
    assert publish["environment"]["name"] == "pypi" if isinstance(publish["environment"], dict) else publish["environment"] == "pypi"
    needs = publish["needs"] if isinstance(publish["needs"], list) else [publish["needs"]]
    assert set(needs) == set(jobs) - {publishers[0]}  # published only once everything else passed
    assert not any("password" in (s.get("with") or {}) for s in publish["steps"])  # no token: trusted publishing


def test_the_metadata_names_the_project() -> None:
    project = PYPROJECT["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert "Framework :: Pytest" in project["classifiers"]
    assert project["requires-python"].startswith(">=3.")
    urls = project["urls"]
    assert set(urls) >= {"Homepage", "Documentation", "Changelog", "Issues"}
    assert urls["Homepage"] == REPOSITORY and urls["Documentation"] == DOCS
    assert all(url.startswith((REPOSITORY, DOCS)) for url in urls.values()), urls
    assert project["keywords"]
    docs = project["optional-dependencies"]["docs"]
    assert {re.split(r"[<>=\[]", d)[0] for d in docs} >= {"mkdocs", "mkdocs-material"} and all(">=" in d for d in docs)


def _tracked_tree(destination: Path) -> Path:
    """A copy of the files git knows about (committed, staged, or new and not ignored): what a
    clean export of the tree as it stands would hold."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, timeout=120)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: cannot tell the project's files from a developer's")
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():  # a file deleted but not yet staged is listed too
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


def _isolation_needed() -> bool:
    """Build in this environment when it has the build backend pyproject.toml asks for (the dev
    extra installs it: seconds), else in an isolated one (pip fetches it: slower, same result)."""
    from packaging.requirements import Requirement

    for spec in PYPROJECT["build-system"]["requires"]:
        requirement = Requirement(spec)
        try:
            if importlib.metadata.version(requirement.name) not in requirement.specifier:
                return True
        except importlib.metadata.PackageNotFoundError:
            return True
    return False


@pytest.fixture(scope="module")
def distributions(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    pytest.importorskip("build")
    pytest.importorskip("twine")
    source = _tracked_tree(tmp_path_factory.mktemp("export"))
    out = tmp_path_factory.mktemp("dist")
    command = [sys.executable, "-m", "build", "--outdir", str(out)]  # the sdist, then the wheel built from it
    if not _isolation_needed():
        command.append("--no-isolation")
    built = subprocess.run([*command, str(source)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheels, sdists = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    assert len(wheels) == len(sdists) == 1, sorted(out.iterdir())
    checked = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(wheels[0]), str(sdists[0])],
                             capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return wheels[0], sdists[0]


def _metadata(text: str) -> email.message.Message:
    return email.message_from_string(text)


def test_the_wheel_carries_the_package_and_its_data_and_no_tests(distributions: tuple[Path, Path]) -> None:
    wheel, _ = distributions
    version = pytest_nl2sql.__version__
    assert wheel.name == f"pytest_nl2sql-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = f"pytest_nl2sql-{version}.dist-info"
        metadata = _metadata(archive.read(f"{info}/METADATA").decode())
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    modules = [n for n in subprocess.run(["git", "ls-files", "pytest_nl2sql/*.py"], cwd=ROOT, capture_output=True, text=True,
                                         timeout=120).stdout.split() if (ROOT / n).is_file()]  # not one deleted meanwhile
    assert modules and set(modules) <= names, sorted(set(modules) - names)
    assert set(DATA_FILES) <= names, sorted(set(DATA_FILES) - names)
    assert f"{info}/licenses/LICENSE" in names
    outside = sorted(n for n in names if not n.startswith(("pytest_nl2sql/", f"{info}/")))
    assert outside == []  # no tests, benchmarks or example suites
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert metadata["Name"] == "pytest-nl2sql" and metadata["Version"] == version
    assert metadata["License-Expression"] == "MIT" and metadata.get_all("License-File") == ["LICENSE"]
    assert "Framework :: Pytest" in metadata.get_all("Classifier")
    assert metadata["Requires-Python"] == PYPROJECT["project"]["requires-python"]
    urls = dict(u.split(", ", 1) for u in metadata.get_all("Project-URL"))
    assert set(urls) >= {"Homepage", "Documentation", "Changelog", "Issues"}
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert "docs" in metadata.get_all("Provides-Extra")
    assert "[pytest11]\nnl2sql = pytest_nl2sql.plugin.hooks" in entry_points
    assert "nl2sql = pytest_nl2sql.cli:main" in entry_points


def test_the_sdist_holds_the_sources_and_the_test_suite(distributions: tuple[Path, Path]) -> None:
    """Everything a packager needs: the sources, data, licence, changelog, and the test suite with
    the example suites it runs (benchmarks stay in the repository)."""
    _, sdist = distributions
    version = pytest_nl2sql.__version__
    top = f"pytest_nl2sql-{version}"
    assert sdist.name == f"{top}.tar.gz"
    with tarfile.open(sdist) as archive:
        names = {n.removeprefix(f"{top}/") for n in archive.getnames()}
    tracked = [n for n in subprocess.run(["git", "ls-files", "pytest_nl2sql", "tests", "example_suites"], cwd=ROOT,
                                         capture_output=True, text=True, timeout=120).stdout.split() if (ROOT / n).is_file()]
    expected = {*tracked, *DATA_FILES, "LICENSE", "README.md", "CHANGELOG.md", "pyproject.toml", "PKG-INFO"}
    assert expected <= names, sorted(expected - names)
    assert not [n for n in names if n.startswith(("benchmarks/", ".ci/", ".github/"))]
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
