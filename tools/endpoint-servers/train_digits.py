"""Trains the classifier MLServer serves in the endpoint tests: logistic regression on
scikit-learn's bundled digits (8x8 images as 64 features; no download), saved with joblib
beside an MLServer model-settings.json that declares the input's name, type and shape so the
server's V2 metadata lists it, and as plain numpy arrays (weights.npz) for KServe's server
(kserve_digits.py), whose environment has no scikit-learn."""
import json
import pathlib
import sys

import joblib
import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression

out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
x, y = load_digits(return_X_y=True)
model = LogisticRegression(max_iter=2000).fit(x, y)
joblib.dump(model, out / "model.joblib")
np.savez(out / "weights.npz", coef=model.coef_, intercept=model.intercept_, classes=model.classes_)
(out / "model-settings.json").write_text(json.dumps({
    "name": "digits",
    "implementation": "mlserver_sklearn.SKLearnModel",
    "parameters": {"uri": "./model.joblib", "version": "v1"},
    "inputs": [{"name": "pixels", "datatype": "FP64", "shape": [-1, 64]}],
    "outputs": [{"name": "predict", "datatype": "INT64", "shape": [-1, 1]}],
}, indent=2))
print(f"digits: training accuracy {model.score(x, y):.3f}", file=sys.stderr)
