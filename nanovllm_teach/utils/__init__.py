"""Small execution-layer helpers shared by the model runner and the layers."""
