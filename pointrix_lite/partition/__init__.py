"""Scenes larger than one machine: split a COLMAP scene into spatial blocks, train each block as an
ordinary run, merge the blocks' Gaussians into one model (docs/distributed.md, "Partitioned training")."""
