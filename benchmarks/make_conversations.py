"""Writes data/conversations.json: multi-turn conversations whose prompts share prefixes.

Four system prompts (passages of the book's calibration text, about 300 tokens each) are shared by
several conversations each; every conversation then asks four questions, one per turn, each built
from a sentence of the book's held-out text. A client replays a conversation turn by turn, each
turn's messages holding the earlier turns and the model's answers, as a chat client does.

    python benchmarks/make_conversations.py
"""
import json, random, re
from pathlib import Path

DATA = Path(__file__).parent / "data"

def main(conversations: int = 16, turns: int = 4, systems: int = 4, seed: int = 0):
    rng = random.Random(seed)
    text = (Path(__file__).parents[1] / "mini_vllm" / "data" / "calibration_text.txt").read_text()
    paragraphs = [p.strip() for p in text.split("\n\n") if len(p.strip()) > 200]
    system_prompts, para = [], iter(paragraphs)
    while len(system_prompts) < systems:               # ~1,200 characters of whole paragraphs
        s = next(para)
        while len(s) < 1200: s += "\n\n" + next(para)
        system_prompts.append("You answer questions about this text.\n\n" + s)
    held_out = (DATA / "quality_text.txt").read_text()
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", held_out) if 40 < len(s) < 200]
    convs = [{"system": i % systems,
              "questions": [f"In one sentence, how does this relate to the text: {q}"
                            for q in rng.sample(sentences, turns)]}
             for i in range(conversations)]
    out = {"system_prompts": system_prompts, "conversations": convs}
    (DATA / "conversations.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"{conversations} conversations of {turns} turns over {systems} system prompts")

if __name__ == "__main__": main()
