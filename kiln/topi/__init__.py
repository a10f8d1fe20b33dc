"""kiln.topi"""
