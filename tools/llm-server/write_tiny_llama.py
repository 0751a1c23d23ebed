"""Writes a tiny Llama-architecture model as GGUF, with random weights, for llama.cpp's server.

The text it generates is nonsense; the compute per token is that of a real transformer of this
shape, which is what the LLM tests measure. Its shape is printed as JSON (and written beside the
model as <name>.json) so the tests give the planning model the same numbers:

    python write_tiny_llama.py OUT.gguf

No download: the tokenizer is a SentencePiece-style vocabulary built here (byte fallback, so any
text tokenizes), the weights come from a seeded generator.
"""

import json
import sys

import gguf
import numpy as np

SHAPE = {
    "layers": 6,
    "embedding": 384,
    "feed_forward": 1024,
    "heads": 6,
    "kv_heads": 2,
    "vocab": 512,
    "context": 4096,
}


def vocabulary(size):
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    types += [gguf.TokenType.BYTE] * 256
    pieces = ["\u2581"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    pieces += [chr(c) for c in range(ord("A"), ord("Z") + 1)] + list(".,;:!?'-0123456789")
    words = "the of and to in is that for it as with was on be by at this are from or an have not which".split()
    pieces += ["\u2581" + w for w in words]
    pairs = "th he in er an re on at en nd ti es or te of ed is it al ar st to nt ng se ha as ou io le ve co me".split()
    pieces += pairs + ["\u2581" + p for p in pairs]
    for piece in pieces:
        if len(tokens) < size and piece not in tokens:
            tokens.append(piece)
            types.append(gguf.TokenType.NORMAL)
    while len(tokens) < size:
        tokens.append(f"<unused{len(tokens)}>")
        types.append(gguf.TokenType.UNUSED)
    # SentencePiece merges the highest-scoring pair first: longer pieces score higher.
    scores = [0.0 if t != gguf.TokenType.NORMAL else float(len(tok)) - i * 1e-4 for i, (tok, t) in enumerate(zip(tokens, types))]
    return tokens, scores, types


def main(path):
    s = SHAPE
    rng = np.random.default_rng(19)
    head_dim = s["embedding"] // s["heads"]
    kv_width = head_dim * s["kv_heads"]

    def weight(rows, cols):
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float16)

    def ones(n):
        return np.ones(n, dtype=np.float32)

    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name("headroom-tiny-llama (random weights)")
    writer.add_context_length(s["context"])
    writer.add_embedding_length(s["embedding"])
    writer.add_block_count(s["layers"])
    writer.add_feed_forward_length(s["feed_forward"])
    writer.add_head_count(s["heads"])
    writer.add_head_count_kv(s["kv_heads"])
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    tokens, scores, types = vocabulary(s["vocab"])
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(True)
    writer.add_chat_template(
        "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}<|assistant|>"
    )

    e, f = s["embedding"], s["feed_forward"]
    writer.add_tensor("token_embd.weight", weight(s["vocab"], e))
    for i in range(s["layers"]):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", ones(e))
        writer.add_tensor(f"blk.{i}.attn_q.weight", weight(e, e))
        writer.add_tensor(f"blk.{i}.attn_k.weight", weight(kv_width, e))
        writer.add_tensor(f"blk.{i}.attn_v.weight", weight(kv_width, e))
        writer.add_tensor(f"blk.{i}.attn_output.weight", weight(e, e))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", ones(e))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", weight(f, e))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weight(f, e))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", weight(e, f))
    writer.add_tensor("output_norm.weight", ones(e))
    # Only whole text pieces are ever sampled: the rows of control, byte and unused tokens are
    # zero, so their logit (0) never reaches the top 40 of the others' (about N(0, 1)). A lone
    # byte token would be half a UTF-8 character, which the server holds back and merges with
    # the next, and a stream would count fewer tokens than were generated.
    output = weight(s["vocab"], e)
    output[[k for k, t in enumerate(types) if t != gguf.TokenType.NORMAL]] = 0
    writer.add_tensor("output.weight", output)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    per_layer = 2 * e * e + 2 * kv_width * e + 3 * e * f + 2 * e
    parameters = s["layers"] * per_layer + 2 * s["vocab"] * e + e
    shape = dict(s, head_dim=head_dim, parameters=parameters, weight_precision="fp16")
    with open(path.removesuffix(".gguf") + ".json", "w") as out:
        json.dump(shape, out)
    print(json.dumps(shape))


if __name__ == "__main__":
    main(sys.argv[1])
