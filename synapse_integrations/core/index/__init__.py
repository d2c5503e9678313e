"""The lexical index (BM25) over the memory's documents."""
