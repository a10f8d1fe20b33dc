"""kiln.arith"""
