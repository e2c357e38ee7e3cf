"""kraft/broker"""
