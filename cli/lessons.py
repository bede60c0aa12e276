"""`python -m attncore lessons [--json]`: the lab's lessons (lab.lessons), each with the link that opens it."""

from __future__ import annotations

import json

from lab.lessons import LESSONS


def cmd_lessons(a) -> int:
    rows = [lesson.to_dict(a.origin) for lesson in LESSONS]
    if a.json:
        print(json.dumps({"lessons": rows}))
        return 0
    for row in rows:
        print(f"{row['name']}  {row['title']}  ({row['page']})\n  {row['url']}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("lessons", help="list the lessons: pages opened at chosen values with a note and a question")
    p.add_argument("--json", action="store_true", help="one JSON object: {lessons: [{name, title, page, url}]}")
    p.add_argument("--origin", default="", metavar="URL",
                   help="put the server's address before each path, e.g. http://127.0.0.1:8501")  # fmt: skip
    p.set_defaults(func=cmd_lessons)
