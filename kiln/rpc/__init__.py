"""kiln.rpc"""
