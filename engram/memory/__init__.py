"""Memories: notes anchored to code — event log, projection, anchors' drift, embeddings, hybrid recall."""
