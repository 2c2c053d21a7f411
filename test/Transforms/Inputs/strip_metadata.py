"""Writes a copy of an ONNX model without the frontend's metadata, as a model
from another exporter would be.    strip_metadata.py IN.onnx OUT.onnx"""
import sys
import onnx

model = onnx.load(sys.argv[1], load_external_data=False)
del model.metadata_props[:]
onnx.save_model(model, sys.argv[2])
