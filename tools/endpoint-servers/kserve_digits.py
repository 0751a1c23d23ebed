"""Serves the digits classifier with KServe's own Python model server (the `kserve` package),
which speaks the Open Inference Protocol over REST and gRPC and, unlike MLServer, accepts the
binary tensor data extension on REST. The endpoint tests run the agent against it.

    python kserve_digits.py WEIGHTS.npz --http_port P --grpc_port G [--require-binary]

The classifier is the one `train_digits.py` fits for MLServer (its coefficients, saved as
numpy arrays, so this environment needs no scikit-learn). With `--require-binary` a request
whose tensors came as JSON is refused with 400: a test then knows the binary encoding arrived.
"""
import argparse
import sys
import uuid

import numpy as np
from kserve import InferOutput, InferRequest, InferResponse, Model, ModelServer
from kserve.errors import InvalidInput
from kserve.model_server import parser as kserve_parser

# KServe's binary framing header; present exactly when the body carries raw tensors.
BINARY_HEADER = "inference-header-content-length"


class Digits(Model):
    def __init__(self, weights: str, require_binary: bool):
        super().__init__("digits")
        self.weights = weights
        self.require_binary = require_binary

    def load(self) -> bool:
        with np.load(self.weights) as saved:
            self.coef = saved["coef"]
            self.intercept = saved["intercept"]
            self.classes = saved["classes"]
        self.ready = True
        return self.ready

    def get_input_types(self):
        return [{"name": "pixels", "datatype": "FP64", "shape": [-1, 64]}]

    def get_output_types(self):
        return [{"name": "predict", "datatype": "INT64", "shape": [-1, 1]}]

    async def predict(self, payload: InferRequest, headers=None, response_headers=None) -> InferResponse:
        sent_binary = any(k.lower() == BINARY_HEADER for k in (headers or {}))
        if self.require_binary and not sent_binary:
            raise InvalidInput("this server was started with --require-binary: send raw tensors")
        x = payload.inputs[0].as_numpy().reshape(-1, 64).astype(np.float64)
        labels = self.classes[np.argmax(x @ self.coef.T + self.intercept, axis=1)].astype(np.int64)
        out = InferOutput(name="predict", shape=[len(labels), 1], datatype="INT64")
        out.set_data_from_numpy(labels.reshape(-1, 1), binary_data=sent_binary)
        return InferResponse(response_id=payload.id or str(uuid.uuid4()), model_name=self.name, infer_outputs=[out])


def main() -> None:
    ours = argparse.ArgumentParser(parents=[kserve_parser])
    ours.add_argument("weights")
    ours.add_argument("--require-binary", action="store_true")
    args, _ = ours.parse_known_args()
    model = Digits(args.weights, args.require_binary)
    model.load()
    ModelServer(http_port=args.http_port, grpc_port=args.grpc_port, workers=1,
                enable_grpc=args.enable_grpc).start([model])


if __name__ == "__main__":
    sys.exit(main())
