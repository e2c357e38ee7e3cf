"""kraft/controller"""
