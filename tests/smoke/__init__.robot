*** Settings ***
Documentation       Smoke: the testbed answers before anything is measured. Tool versions are in
...                 the suite metadata of log.html.
Test Tags           SMOKE
