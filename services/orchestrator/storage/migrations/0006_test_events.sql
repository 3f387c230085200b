-- Events made by a test run, or derived from one: the instances they start
-- are test runs too, and stay out of re-entry history.
ALTER TABLE events ADD COLUMN is_test boolean NOT NULL DEFAULT false;
