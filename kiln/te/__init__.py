"""kiln.te"""
