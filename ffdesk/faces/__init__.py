"""Face analysis: detection, landmarks, alignment, embeddings, selection, tracking/smoothing."""
