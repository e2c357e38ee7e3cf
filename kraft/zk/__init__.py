"""kraft/zk"""
