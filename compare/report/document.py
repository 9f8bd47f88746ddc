"""A report page as a list of blocks, rendered to Markdown or HTML.  A link
names another page by its stem: `.md` in Markdown, `.html` in HTML, so each
format's pages link to each other."""
from __future__ import annotations

import html

from tabulate import tabulate


class Document:
    def __init__(self, title: str):
        self.title = title
        self.blocks: list[tuple] = []

    def heading(self, text: str, level: int = 2) -> None:
        self.blocks.append(("heading", level, text))

    def para(self, text: str) -> None:
        self.blocks.append(("para", text))

    def table(self, table, caption: str | None = None) -> None:
        """`table` is (headers, rows) or None (then nothing is added)."""
        if table is not None:
            self.blocks.append(("table", table[0], table[1], caption))

    def code(self, text: str) -> None:
        self.blocks.append(("code", text))

    def image(self, filename: str, alt: str) -> None:
        self.blocks.append(("image", filename, alt))

    def links(self, items: list[tuple[str, str, str]]) -> None:
        """A list of (text, page stem, what is there) links to other pages of the report."""
        if items:
            self.blocks.append(("links", items))

    def to_markdown(self) -> str:
        out = [f"# {self.title}", ""]
        for block in self.blocks:
            kind = block[0]
            if kind == "heading":
                out += ["#" * block[1] + " " + block[2], ""]
            elif kind == "para":
                out += [block[1], ""]
            elif kind == "table":
                _, headers, rows, caption = block
                out += [tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True), ""]
                if caption:
                    out += [f"*{caption}*", ""]
            elif kind == "code":
                out += ["```", block[1], "```", ""]
            elif kind == "image":
                out += [f"![{block[2]}]({block[1]})", ""]
            elif kind == "links":
                out += [f"- [{text}]({stem}.md)" + (f": {what}" if what else "") for text, stem, what in block[1]]
                out += [""]
        return "\n".join(out)

    def to_html(self) -> str:
        esc = html.escape
        out = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'>", f"<title>{esc(self.title)}</title>",
               "<style>body{font-family:sans-serif;max-width:72em;margin:auto}table{border-collapse:collapse;"
               "margin:0.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}"
               "td:first-child,th:first-child{text-align:left}img{max-width:100%}</style>",
               "</head><body>", f"<h1>{esc(self.title)}</h1>"]
        for block in self.blocks:
            kind = block[0]
            if kind == "heading":
                out.append(f"<h{block[1]}>{esc(block[2])}</h{block[1]}>")
            elif kind == "para":
                out.append(f"<p>{esc(block[1])}</p>")
            elif kind == "table":
                _, headers, rows, caption = block
                out.append(tabulate(rows, headers=headers, tablefmt="html", disable_numparse=True))
                if caption:
                    out.append(f"<p><em>{esc(caption)}</em></p>")
            elif kind == "code":
                out.append(f"<pre>{esc(block[1])}</pre>")
            elif kind == "image":
                out.append(f"<p><img src='{esc(block[1])}' alt='{esc(block[2])}'></p>")
            elif kind == "links":
                out.append("<ul>" + "".join(f"<li><a href='{esc(stem)}.html'>{esc(text)}</a>"
                                            + (f": {esc(what)}" if what else "") + "</li>"
                                            for text, stem, what in block[1]) + "</ul>")
        out.append("</body></html>")
        return "\n".join(out) + "\n"
