"""Processors: classical landmark swap, ONNX swappers, enhancers, masks, blending."""
