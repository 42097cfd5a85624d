"""Script command lines read from the docs beside them (discovery/commands.py); nothing runs."""

from __future__ import annotations

from pathlib import Path

from jaxlsp.discovery.commands import documented_command, needs_arguments


def layout(root: Path, docs: dict[str, str]) -> Path:
    script = root / "examples" / "vae" / "main.py"
    script.parent.mkdir(parents=True)
    script.write_text("print('hi')\n")
    for rel, text in docs.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return script


def test_the_readme_beside_the_script(tmp_path: Path) -> None:
    script = layout(
        tmp_path,
        {"examples/vae/README.md": "```\npython main.py --workdir=/tmp/vae --config=configs/default.py\n```\n"},
    )
    found = documented_command(script, tmp_path)
    assert found is not None
    assert found.argv == ("--workdir=/tmp/vae", "--config=configs/default.py")
    assert found.where(tmp_path) == "examples/vae/README.md:2"


def test_a_root_doc_names_it_by_its_path_and_continues_lines(tmp_path: Path) -> None:
    script = layout(
        tmp_path,
        {"run.sh": "#!/bin/sh\npython3 -u examples/vae/main.py \\\n  --steps 2 \\\n  --name 'a b' > out.log\n"},
    )
    found = documented_command(script, tmp_path)
    assert found is not None and found.argv == ("--steps", "2", "--name", "a b")


def test_what_is_not_taken(tmp_path: Path) -> None:
    script = layout(
        tmp_path,
        {
            "examples/vae/README.md": (
                "python main.py --workdir=$OUT/vae\n"  # a shell variable: needs a shell
                "python main.py\n"  # no arguments: nothing to add
                "python other/main.py --x 1\n"  # another main.py
                "python train.py --x 2\n"  # another script
            )
        },
    )
    assert documented_command(script, tmp_path) is None


def test_home_is_expanded_as_a_shell_would(tmp_path: Path) -> None:
    script = layout(tmp_path, {"examples/vae/README.md": "python3 main.py --workdir=$HOME/logs/vae --cache ~/c\n"})
    found = documented_command(script, tmp_path)
    assert found is not None and found.argv == (f"--workdir={Path.home()}/logs/vae", "--cache", f"{Path.home()}/c")


def test_what_a_script_requires_on_its_command_line(tmp_path: Path) -> None:
    cases = {
        "positional.py": ("p = argparse.ArgumentParser()\np.add_argument('size', type=int)\n", "size"),
        "optional.py": ("p.add_argument('size', nargs='?', default=3)\np.add_argument('--n', type=int)\n", None),
        "required.py": ("p.add_argument('--config', required=True)\n", "--config"),
        "absl.py": ("flags.mark_flags_as_required(['workdir', 'config'])\n", "workdir"),
        "argv.py": ("import sys\nn = int(sys.argv[1])\n", "sys.argv[1]"),
        "plain.py": ("print('no arguments')\n", None),
        # bonsai's __main__.py: `python -m bonsai` with no command exits 2 with its usage
        "subcommand.py": ("sub = p.add_subparsers()\nsub.required = True\nsub.dest = 'command'\n", "a command"),
        "subcommand_call.py": ("sub = p.add_subparsers(dest='command', required=True)\n", "a command"),
        "optional_subcommand.py": ("sub = p.add_subparsers(dest='command')\n", None),
    }
    for name, (text, wanted) in cases.items():
        (tmp_path / name).write_text(text)
        assert needs_arguments(tmp_path / name) == wanted, name
