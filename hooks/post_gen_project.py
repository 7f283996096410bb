"""Cookiecutter's post-generation hook: fills the new project with the template's own files.

Cookiecutter (or cruft) has rendered the stub folder into the new project's folder, this
process's working directory; hooks/project_generator.py does the rest. Bad answers: one line
each on stderr, exit status 1, and cookiecutter removes the folder. Never asks anything: hooks
also run under `--no-input`.
"""

import json
import os
import sys
from pathlib import Path

# The answers, as JSON, rendered in by cookiecutter: the only Jinja in the hooks. Values that
# are neither text nor yes/no (cruft's commit objects, the prompts) as text; none as null.
ANSWERS = json.loads(r"""{
{%- for key, value in cookiecutter.items() %}
  {{ key | tojson }}: {{ (value if value is boolean or value is string or value is none else value | string) | tojson }},
{%- endfor %}
  "_template_dir": {{ lipsum.__globals__.os.getcwd() | tojson }}
}""")
# "_template_dir": the template folder, however it was fetched (a relative path, a git URL, a
# zip, `--directory`, cruft). Cookiecutter and cruft render this file with Jinja in their own
# process while its working directory is the template folder (`run_hook_from_repo_dir`), and
# only then run it here. Jinja has no getcwd of its own: `os` comes from the module of Jinja's
# built-in `lipsum`. What cookiecutter passes (`_repo_dir`) is relative to the folder it was
# started in, which a hook cannot know without /proc or PWD (none on Windows); cruft passes
# no folder at all.


def main() -> int:
    template = Path(ANSWERS["_template_dir"])
    sys.path.insert(0, str(template / "hooks"))
    from project_generator import GenerationError, generate, next_steps

    try:
        generate(template, ANSWERS, Path.cwd())
    except GenerationError as err:
        for line in str(err).splitlines():
            print(f"ERROR: {line}", file=sys.stderr)
        return 1
    # Only where cookiecutter itself ran (it alone records `_output_dir`): cruft also renders
    # into a temporary folder for `cruft update` and `diff`, where a "cd there" would mislead.
    # PWD: the folder the shell started cookiecutter in (this process runs in the project's).
    if "_output_dir" in ANSWERS:
        print(next_steps(ANSWERS, Path.cwd(), os.environ.get("PWD")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
