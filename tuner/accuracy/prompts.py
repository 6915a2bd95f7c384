"""The guard's fixed prompt set: short, varied English openings (pure data).

Fixed so that every trial of every study replays the same text; ``prompt_set(n)`` takes the
first ``n`` and, past the list, numbers further copies so that each prompt stays distinct.
"""

from __future__ import annotations

PROMPTS: tuple[str, ...] = (
    "The capital of France is",
    "Write a short poem about the sea:",
    "def fibonacci(n):",
    "The three laws of thermodynamics are",
    "Once upon a time, in a small village,",
    "Translate to German: The weather is nice today.",
    "The main causes of the First World War were",
    "Explain what a hash table is in one paragraph.",
    "import numpy as np\n\ndef normalise(x):",
    "A recipe for a simple tomato soup:",
    "The difference between a virus and a bacterium is",
    "Q: What is 17 multiplied by 23?\nA:",
    "The history of the printing press begins",
    "Dear hiring manager, I am writing to apply for",
    "SELECT name, COUNT(*) FROM orders",
    "Photosynthesis converts light into",
    "The best way to learn a new language is",
    "In 1969, the first humans to walk on the Moon",
    "Here is a list of prime numbers: 2, 3, 5,",
    "The plot of Hamlet, in brief:",
    "How does a transistor work?",
    "The rules of chess say that a knight moves",
    "Summarise the theory of evolution:",
    "#include <stdio.h>\n\nint main(void) {",
    "Three tips for a good night's sleep:",
    "The Pythagorean theorem states that",
    "An email to a colleague about a delayed project:",
    "The water cycle consists of",
    "Why is the sky blue?",
    "The French Revolution began in",
    "A haiku about autumn leaves:",
    "The largest planet in the solar system is",
)


def prompt_set(n: int) -> tuple[str, ...]:
    """The first ``n`` prompts of the fixed set (numbered copies past its end)."""
    return tuple(PROMPTS[i % len(PROMPTS)] + ("" if i < len(PROMPTS) else
                                             f" ({i // len(PROMPTS) + 1})")
                 for i in range(n))
