"""Qt views and the QThread worker. The only package that imports Qt."""
