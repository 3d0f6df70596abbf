"""Imported by the fork server of forkrun alone (its preload list): transformers' lazy imports
happen there once, so that a forked trainer starts without them."""
import forkrun

forkrun.warm_transformers()
