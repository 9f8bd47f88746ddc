"""The README's first screen answers: the two commands and the answer table, the table being what its
command makes from the committed results now (scripts/readme_answer.py writes it anew)."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("readme_answer", ROOT / "scripts" / "readme_answer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_answer_table_is_what_the_committed_results_say(monkeypatch):
    monkeypatch.chdir(ROOT)   # the command names the results files from the repository's root
    in_readme, made = _script().generated((ROOT / "README.md").read_text(encoding="utf-8"))
    assert in_readme == made, "README.md's answer table is stale: run scripts/readme_answer.py"


def test_the_first_screen_holds_the_two_commands_and_the_table():
    first = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:80]
    text = "\n".join(first)
    assert "make demo" in text and "make test" in text
    assert "<!-- answer-table end -->" in text and "| net" in text and "| speedup" in text


def test_the_tables_are_narrow():
    """One table per device, at most 7 columns each."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text[text.index("<!-- answer-table:"):text.index("<!-- answer-table end -->")]
    headers = [line for line in block.splitlines() if line.startswith("| net")]
    assert len(headers) >= 2 and all(line.count("|") - 1 <= 7 for line in headers)
