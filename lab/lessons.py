"""The lab's lessons as data: each one a page opened at chosen values, some controls hidden or locked, with a teacher's
note, a question and its answer (the URL parameters ui.lesson reads). The Lessons page lists them and
`python -m attncore lessons` prints them; docs/lessons.md says how to write one."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

PICTURES = Path(__file__).resolve().parents[1] / "static" / "lessons"
MAX_TEXT = 200  # characters in a note, a question or an answer: the URL's cap for every text parameter


@dataclass(frozen=True)
class Lesson:
    name: str  # a short identifier, e.g. "sqrt-dk"
    title: str
    page: str  # the page's URL path (ui.nav's PageSpec.url_path), e.g. "scaling"
    params: dict[str, str] = field(default_factory=dict)  # the page's own URL keys -> values, as a link spells them
    hide: tuple[str, ...] = ()  # URL keys of the controls not drawn
    lock: tuple[str, ...] = ()  # URL keys of the controls drawn disabled
    note: str = ""
    question: str = ""
    answer: str = ""
    idea: str = ""  # the lesson in one line, for the gallery on the Lessons page

    def query(self) -> list[tuple[str, str]]:
        """The query parameters of the lesson's link, in order."""
        lesson = [("hide", ",".join(self.hide)), ("lock", ",".join(self.lock))]
        lesson += [("note", self.note), ("question", self.question), ("answer", self.answer)]
        return list(self.params.items()) + [(k, v) for k, v in lesson if v]

    def url(self, origin: str = "") -> str:
        """The lesson's link: /<page>?<params>, after `origin` (e.g. the server's scheme://host:port)."""
        return f"{origin}/{self.page}?{urlencode(self.query())}"

    def to_dict(self, origin: str = "") -> dict:
        return {"name": self.name, "title": self.title, "page": self.page, "url": self.url(origin)}


LESSONS = (
    Lesson(
        "sqrt-dk", "Why divide the scores by √d_k", "scaling",
        idea="Unscaled dot products grow with d_k and saturate the softmax.",
        params={"scal_dk": "8,64,512"}, hide=("scal_reps", "scal_seed"), lock=("scal_dk",),
        note="Compare the scaled and unscaled rows at each d_k: the spread of q·k, the softmax's entropy, its "
             "largest weight and its sensitivity Σp(1−p).",
        question="What happens to the unscaled softmax as d_k grows, and why does that stop learning?",
        answer="Var(q·k) grows like d_k, so the unscaled softmax saturates: one weight near 1, Σp(1−p) near 0, almost "
               "no gradient. Dividing by √d_k keeps the scores at sd 1.",
    ),
    Lesson(
        "sqrt-dk-long-rows", "Scaling over many keys", "scaling",
        idea="Scaling keeps the softmax soft, not uniform, over a thousand keys.",
        params={"scal_dk": "64", "scal_T": "1024"}, hide=("scal_reps", "scal_seed"), lock=("scal_dk",),
        note="One d_k, and a thousand keys per query: the most spread-out softmax has entropy ln T.",
        question="Does √d_k scaling make the softmax uniform over the keys? Compare the entropy with ln T.",
        answer="No: scaling keeps the scores at sd 1, so the softmax stays soft but not uniform; its entropy stays "
               "below ln T.",
    ),
    Lesson(
        "causal-mask", "The causal mask goes before the softmax", "masks",
        idea="Mask the scores, not the weights: only then do rows sum to 1.",
        hide=("mask_seed",), lock=("mask_T",),
        note="The same scores masked two ways: −∞ before the softmax, or zeroed after it.",
        question="Which order leaves every row summing to 1, and which lets a future token change the weights?",
        answer="Masking before: the softmax spreads the whole weight over the allowed keys. Zeroing after leaves "
               "rows that sum to less than 1, and the future scores still set the normaliser.",
    ),
    Lesson(
        "position-length", "Position encodings and length generalisation", "lengths",
        idea="Which position encodings still work past the lengths they were trained on.",
        params={"lit_task": "copy"}, hide=("lit_rand",), lock=("lit_task",),
        note="Position encodings trained on the same lengths, tested beyond them, over seeds. Train the missing runs "
             "to compare them.",
        question="Which encodings keep their accuracy past the longest training length, and which fall at once?",
        answer="Read it off the curves: learned absolute positions have no embedding past the trained range; "
               "relative schemes can carry on further. The interval says how sure the seeds are.",
    ),
    Lesson(
        "post-ln-depth", "Post-LN at depth", "regimes",
        idea="Where the LayerNorm sits decides which learning rates a deep model survives.",
        params={"reg_exp": "lr", "reg_pair": "norm", "reg_layers": "6"}, hide=("reg_task", "reg_steps"),
        lock=("reg_exp", "reg_pair", "reg_layers"),
        note="Pre-LN and post-LN, 6 blocks each, trained side by side over seeds at learning rates small to large.",
        question="At which learning rates does post-LN fall behind pre-LN, and can the seeds tell?",
        answer="Post-LN's residual stream passes through every LayerNorm, so its gradients at depth need a small "
               "rate or warm-up (Xiong et al. 2020). The interval and sign-flip test say how sure.",
    ),
    Lesson(
        "qk-norm", "qk-norm at a high learning rate", "regimes",
        idea="A LayerNorm on queries and keys against runaway attention logits.",
        params={"reg_exp": "lr", "reg_pair": "qk_norm"}, hide=("reg_task", "reg_steps", "reg_zloss"),
        lock=("reg_exp", "reg_pair"),
        note="The same model with and without a LayerNorm on q and k, up to high learning rates.",
        question="Where do the two differ: at the small rates or the large ones?",
        answer="At the large ones, if anywhere: without qk-norm the attention logits can grow until the softmax "
               "saturates (Dehghani et al. 2023; Wortsman et al. 2023).",
    ),
    Lesson(
        "induction-zeroed", "An induction head forms, and is zeroed", "induction",
        idea="In-context learning switches on suddenly, and rests on two heads.",
        hide=("ind_emb", "ind_norm"), lock=("ind_var",),
        note="Watch the loss on the repeated half drop suddenly during training; then zero the heads that do it.",
        question="What happens to in-context learning when the induction heads are zeroed?",
        answer="The repeated half's loss goes back up: the drop was the induction circuit (Olsson et al. 2022).",
    ),
    Lesson(
        "attention-sink", "An attention sink and the sliding window", "sinks",
        idea="Heads park unused attention on the first token; a window must keep it.",
        lock=("sk_win",),
        note="A head parks its attention on the first token. A sliding window drops that token; StreamingLLM keeps it.",
        question="Why does a window of recent keys lose accuracy, and why does keeping token 0 restore it?",
        answer="The sink head needs somewhere to put attention it does not use; without token 0 that weight lands on "
               "real keys (Xiao et al. 2024).",
    ),
    Lesson(
        "grokking-decay", "Grokking with and without weight decay", "grokking",
        idea="Memorised at once, generalised much later: what weight decay changes.",
        hide=("grok_lr", "grok_steps"),
        note="Modular addition: the training set is learnt at once, the held-out pairs much later, or never.",
        question="Which variant generalises, and what does its Fourier spectrum show?",
        answer="With weight decay the held-out accuracy rises long after training accuracy, and the embedding keeps "
               "a few frequencies (Nanda et al. 2023).",
    ),
    Lesson(
        "map-explanation", "Is a head's map an explanation?", "explanations",
        idea="A very different attention map can give the same output.",
        note="A head's attention map beside other maps: shuffled, adversarial, and other seeds' heads. Its controls "
             "appear once the sidebar's run is trained.",
        question="If a very different map gives the same output, does the original map explain the output?",
        answer="Not by itself (Jain & Wallace 2019; Wiegreffe & Pinter 2019): compare with the baseline seeds "
               "before reading a map as the reason.",
    ),
    Lesson(
        "kv-cache-gpu", "Sizing one model's KV cache for a GPU", "kv-cache",
        idea="How many long sequences fit beside the weights, and what buys more.",
        params={"kv_preset": "llama-3-8b", "kv_context": "131072"}, lock=("kv_preset",),
        hide=("kv_m_layers", "kv_m_d", "kv_m_heads", "kv_m_new", "kv_m_repeats"),
        note="One model's key-value cache at a long context: 2 · layers · KV heads · head size · bytes per token.",
        question="How many sequences of this length fit beside the weights, and what buys more: fp8 or fewer KV heads?",
        answer="Both halve the cache per step: fp8 halves the bytes, grouped-query attention divides the heads. "
               "Read the fit from the page.",
    ),
)  # fmt: skip


def picture(lesson: Lesson) -> Path:
    """The lesson's picture in the Lessons page's gallery (static/lessons/<name>.png, made by
    benchmarks/lesson_pictures.py)."""
    return PICTURES / f"{lesson.name}.png"


def by_name(name: str) -> Lesson:
    found = next((lesson for lesson in LESSONS if lesson.name == name), None)
    if found is None:
        raise KeyError(f"no lesson named {name!r}; known: {', '.join(lesson.name for lesson in LESSONS)}")
    return found
