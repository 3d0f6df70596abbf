"""Model architectures the trainer can build with random weights (model.shape): see README.md."""
