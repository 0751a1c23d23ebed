"""Writes a word-level tokenizer, built from the agent's shipped prompt corpus, into a Hugging
Face cache as the repository "headroom/tiny-words", so that load tools which insist on a
tokenizer (AIPerf) find one with the network off: tiny_tokenizer.py HF_HOME.

Its token counts are not the mock server's; the benchmark asks AIPerf for the server's counts."""
import json
import pathlib
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

here = pathlib.Path(__file__).resolve().parent
corpus = here.parent.parent / "measurements-agent/src/suites/endpoint/prompts.txt"
revision = "0" * 39 + "1"
repo = pathlib.Path(sys.argv[1]) / "hub/models--headroom--tiny-words"
snapshot = repo / "snapshots" / revision
snapshot.mkdir(parents=True, exist_ok=True)
(repo / "refs").mkdir(exist_ok=True)
(repo / "refs/main").write_text(revision)

tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tokenizer.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
tokenizer.train_from_iterator(corpus.read_text().split(), trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
tokenizer.save(str(snapshot / "tokenizer.json"))
config = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "model_max_length": 1_000_000}
(snapshot / "tokenizer_config.json").write_text(json.dumps(config))
(snapshot / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
