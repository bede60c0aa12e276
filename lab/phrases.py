"""A run in words, read from the settings' records (attncore.settings): its one-line description (the pages'
captions and titles, the command line's summary) and a variant's name against a base run (the ablation tables).

Each record says how a value reads (its phrase), where it stands (after, group, named_at) and when it is named; a
task writes its own length and fields (Task.describe). Pure functions over configs: no store, no pandas.
"""

from __future__ import annotations

from attncore import task as tasks
from attncore.config import RunConfig
from attncore.settings import SETTINGS, Setting, value_of
from lab import formats

SEP = " · "  # between the phrases of a description
HEAD_WIDTH = "d_k {}"  # the head width d // heads, derived: a variant's name says it when it changes,
BATCH = "batch_size"  # said as the rows a training batch holds (Task.batch_rows), not the setting's cap on them
HEAD_WIDTH_GROUP = "size"  # at the end of the phrases of the model's size (d, heads, layers)


def written(s: Setting, value) -> str:
    """A value as the descriptions write it: a count with its noun, a number with its spec, else as the record."""
    if s.noun:
        return formats.count(value, s.noun)
    if s.spec and isinstance(value, (int, float)) and not isinstance(value, bool):
        return format(value, s.spec)
    return s.format(value)


def phrase(s: Setting, value) -> str:
    """How a description names a value: 'lr 3e-3', 'scaling off'; a bool whose phrase has no value is named only
    when on ('qk-norm')."""
    if s.kind is bool and "{}" not in s.phrase:
        return s.phrase if value else ""
    return s.phrase.format(written(s, value))


def variant_phrase(s: Setting, value) -> str:
    """How a variant's name names a changed value: its own words if the record has some ('no position'), else its
    variant template or its phrase; a bool without a value in it is 'qk-norm' or 'no qk-norm'."""
    if s.words and value in s.words:
        return s.words[value]
    template = s.variant if s.variant is not None else s.phrase
    if s.kind is bool and "{}" not in template:
        return template if value else f"no {template}"
    return template.format(written(s, value))


def _description_order() -> list[Setting]:
    """The settings in declaration order, each one that stands after another (after, requires) right after it."""
    anchored: dict[str, list[Setting]] = {}
    for s in SETTINGS.values():
        if s.after or s.requires:
            anchored.setdefault(s.after or s.requires, []).append(s)
    order: list[Setting] = []

    def place(s: Setting) -> None:
        order.append(s)
        for later in anchored.get(s.name, ()):
            place(later)

    for s in SETTINGS.values():
        if not (s.after or s.requires):
            place(s)
    return order


def _described(run: RunConfig, s: Setting) -> str:
    """The phrase of a setting in the run's description, or '' where it is not named: a setting added after the
    runs were stored (optional) only when set or when the setting it needs is set."""
    value = value_of(run, s)
    required = SETTINGS.get(s.requires) if s.requires else None
    if required is not None and not required.is_set(value_of(run, required)):
        return ""
    if s.optional and required is None and not s.is_set(value):
        return ""
    if s.name == BATCH:  # the batch as the task draws it: a task with a small training set trains on all of it
        rows = tasks.get(run.task.name).batch_rows(run.task, value)
        if rows < value:
            return phrase(s, rows) + " (the whole training set)"
    return phrase(s, value)


def _phrases(run: RunConfig, keep=lambda s: True) -> list[tuple[Setting | None, str]]:
    """(setting, words) of each phrase the run's description says of the settings `keep` keeps, in order; the
    task's own words (Task.describe: its length, range and fields) stand where the first of its settings without a
    phrase stands (setting None)."""
    out: list[tuple[Setting | None, str]] = []
    task_said = False
    for s in _description_order():
        if not keep(s):
            continue
        if s.section == "task" and not s.phrase:
            if not task_said:
                out.append((None, tasks.get(run.task.name).describe(run.task)))
            task_said = True
        elif words := _described(run, s):
            out.append((s, words))
    return out


def _joined(phrases: list[tuple[Setting | None, str]]) -> str:
    """Phrases as one line: a setting that needs another right after it with a space ('cosine decay to 0.1 lr'),
    one of the group before it with a comma ('d=32, 4 heads'), the others with SEP."""
    text, last = "", None
    for s, words in phrases:
        if not text:
            text = words
        elif s is not None and s.requires:
            text += " " + words
        elif s is not None and last is not None and s.group and s.group == last.group:
            text += ", " + words
        else:
            text += SEP + words
        last = s
    return text


def describe(run: RunConfig, leave_out=()) -> str:
    """One line naming a run, every value as its record writes it, the task's length and fields as the task does:
    'copy · L=6 · seed 0 · learned position · pre-LN · scaling on · lr 3e-3 · 1,500 steps · d=32, 4 heads,
    2 layers · batch 32'. `leave_out` names settings not to say (the seed, for a view over seeds)."""
    return _joined(_phrases(run, lambda s: s.name not in leave_out))


def group_text(run, group: str) -> str:
    """The phrases of one group of the run's description, with those that need them ('warm-up 300 steps, cosine
    decay to 0.1 lr' for the schedule), or ''. `run` may be any object with the sections the group lives in."""
    return _joined(_phrases(run, lambda s: SETTINGS.get(s.requires or s.name, s).group == group))


def variant_name(run: RunConfig, base: RunConfig) -> str:
    """How `run` differs from `base`, in the article's words: 'no position', 'pre-LN, lr 1e-2', 'd 64, d_k 16',
    'full' if not at all. Each changed setting is named by its record (and those it names too: an lr change names
    the norm, as the article does), in the records' order; one that follows another is not named where it follows
    it (d_ff = 4d of a new d). The head width d_k = d // heads is named at the end of the model's size group."""
    differs = {s.name for s in SETTINGS.values() if value_of(run, s) != value_of(base, s)}
    differs |= {also for name in set(differs) for also in SETTINGS[name].also_names}
    order = sorted(SETTINGS.values(), key=lambda s: s.named_at if s.named_at is not None else len(SETTINGS))
    parts, size_end, named = [], None, {}
    for s in order:
        if s.name not in differs or not (s.phrase or s.variant):
            continue
        if s.follows:
            leader, factor = s.follows
            if leader in differs and value_of(run, s) == factor * value_of(run, SETTINGS[leader]):
                continue
        words = variant_phrase(s, value_of(run, s))
        if s.requires in named and named[s.requires] == len(parts) - 1:  # 'cosine decay to 0.1 lr', as described
            parts[-1] += " " + words
        else:
            parts.append(words)
        named[s.name] = len(parts) - 1
        if s.group == HEAD_WIDTH_GROUP:
            size_end = len(parts)
    if run.model.d_head != base.model.d_head:
        parts.insert(len(parts) if size_end is None else size_end, HEAD_WIDTH.format(run.model.d_head))
    return ", ".join(parts) or "full"
