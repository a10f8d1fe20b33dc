"""kiln.autotvm"""
